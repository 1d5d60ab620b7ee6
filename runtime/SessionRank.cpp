#include "runtime/SessionRank.h"

#include "runtime/CpuBackend.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/RuntimeError.h"
#include "runtime/checkpoint/CooperativeWriter.h"

#include <map>

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

std::unique_ptr<Communicator> SessionRank::communicator(LocalGroup &group, int64_t member) {
  return std::make_unique<LocalCommunicator>(group, member, copier());
}

PeerCopier &SessionRank::copier() { return hostCopier(); }

void SessionRank::saveRows(const plan::Plan &plan, Communicator &hostComm,
                           const std::string &path, const std::vector<int64_t> &subset) {
  // The writer pwrites from host memory: a GPU rank's params are staged.
  std::map<int32_t, std::vector<std::byte>> staged;
  if (!hostAddressable())
    for (const auto &[index, buffer] : state_.params()) {
      std::vector<std::byte> &bytes = staged[index];
      bytes.resize(static_cast<size_t>(buffer.bytes()));
      if (!bytes.empty()) copyToHost(bytes.data(), buffer.data(), bytes.size());
    }
  checkpoint::saveCooperatively(
      plan,
      [&](int32_t i) -> const std::byte * {
        if (!hostAddressable()) {
          auto it = staged.find(i);
          return it == staged.end() ? nullptr : it->second.data();
        }
        const DeviceBuffer *local = state_.paramStorage(i);
        return local ? local->data() : nullptr;
      },
      hostComm, path, subset);
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
