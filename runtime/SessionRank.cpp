#include "runtime/SessionRank.h"

#include "runtime/CpuBackend.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/RuntimeError.h"

namespace shardc::runtime {

SessionRank::SessionRank(int64_t rank, std::unique_ptr<Device> device,
                         std::unique_ptr<Backend> backend)
    : device_(std::move(device)), backend_(std::move(backend)), state_(rank) {}

SessionRank::~SessionRank() { state_.releaseAll(); }

HostTensor SessionRank::toHost(const TensorView &view) {
  HostTensor t{view.name, view.dtype, view.shape, {}};
  t.data.resize(static_cast<size_t>(t.expectedBytes()));
  if (!t.data.empty()) copyToHost(t.data.data(), view.data, t.data.size());
  return t;
}

namespace {

class CpuSessionRank final : public SessionRank {
public:
  static std::unique_ptr<SessionRank> make(int64_t rank, int threads) {
    auto device = std::make_unique<CpuDevice>();
    auto backend = std::make_unique<CpuBackend>(*device, threads);
    return std::unique_ptr<SessionRank>(
        new CpuSessionRank(rank, std::move(device), std::move(backend)));
  }
  std::unique_ptr<Communicator> communicator(LocalGroup &group) override {
    return std::make_unique<LocalCommunicator>(group, state().rank());
  }
  void trimReuseCache() override { cpu_.trimReuseCache(); }
  HostMemory::Stats blockStats() const override { return cpu_.largeBlockStats(); }
  bool hostAddressable() const override { return true; }

private:
  CpuSessionRank(int64_t rank, std::unique_ptr<CpuDevice> device,
                 std::unique_ptr<CpuBackend> backend)
      : SessionRank(rank, std::move(device), std::move(backend)),
        cpu_(static_cast<CpuDevice &>(this->device())) {}

  CpuDevice &cpu_;
};

}  // namespace

SessionRankFactory cpuSessionRanks(int threads) {
  if (threads < 1)
    throw RuntimeError("kernel threads must be >= 1, got " + std::to_string(threads));
  return [threads](int64_t rank) { return CpuSessionRank::make(rank, threads); };
}

}  // namespace shardc::runtime
