// LocalSession runs on whatever ranks its SessionRankFactory makes
// (runtime/SessionRank.h): the CPU by default, a GPU's ranks in
// runtime/cuda/CudaSession.h. Here a CPU rank that says its storage is not
// host memory (as a GPU's is not) must give the default session's values,
// outputs and saved file, reading device memory only through copyToHost,
// and must be entered on every thread that runs it.
#include "PipelineTestSupport.h"
#include "runtime/CpuBackend.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/LocalRun.h"
#include "runtime/LocalSession.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <unistd.h>

using namespace shardc;

namespace {

/// Counts what the session asks of it; its storage is "not host memory".
struct Counters {
  std::atomic<int> entered{0}, communicators{0};
  std::atomic<int64_t> copiedBytes{0};
};

class DetachedRank final : public runtime::SessionRank {
public:
  static std::unique_ptr<runtime::SessionRank> make(int64_t rank, Counters &counters) {
    auto device = std::make_unique<runtime::CpuDevice>();
    auto backend = std::make_unique<runtime::CpuBackend>(*device, 1);
    return std::unique_ptr<runtime::SessionRank>(
        new DetachedRank(rank, std::move(device), std::move(backend), counters));
  }
  /// Like a GPU rank's, this communicator moves device memory only: the
  /// session must not hand it host values (a save's bookkeeping).
  std::unique_ptr<runtime::Communicator> communicator(runtime::LocalGroup &group) override {
    ++counters_.communicators;
    return std::make_unique<runtime::LocalCommunicator>(group, state().rank());
  }
  void enterThread() override { ++counters_.entered; }
  bool hostAddressable() const override { return false; }
  void copyToHost(void *hostDst, const void *src, size_t bytes) override {
    counters_.copiedBytes += static_cast<int64_t>(bytes);
    SessionRank::copyToHost(hostDst, src, bytes);
  }

private:
  DetachedRank(int64_t rank, std::unique_ptr<runtime::CpuDevice> device,
               std::unique_ptr<runtime::CpuBackend> backend, Counters &counters)
      : SessionRank(rank, std::move(device), std::move(backend)), counters_(counters) {}
  Counters &counters_;
};

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("LocalSession: ranks from a factory whose storage is not host memory",
          "[pipeline][session]") {
  const compiler::Graph graph = test::loadExample("llama-tiny");
  const int64_t n = 3;
  const plan::Plan plan = test::compileForTest(graph, n);
  const std::vector<runtime::HostTensor> inputs =
      runtime::makeDeterministicInputs(plan, /*seed=*/4, compiler::inputBounds(graph));
  Counters counters;
  runtime::LocalSession reference(plan, /*seed=*/9);
  runtime::LocalSession detached(plan, /*seed=*/9, std::chrono::seconds(60),
                                 [&](int64_t rank) { return DetachedRank::make(rank, counters); });

  reference.init();
  const std::vector<runtime::PhaseReport> init = detached.init();
  CHECK(counters.entered == n);  // one call: each rank entered on its thread
  CHECK(counters.communicators == n);
  for (const runtime::PhaseReport &report : init) CHECK(report.peakBytes == report.predictedPeakBytes);

  int64_t paramBytes = 0;
  for (int64_t r = 0; r < n; ++r) {
    paramBytes += detached.paramBytes(r);
    for (size_t i = 0; i < plan.params.size(); ++i) {
      const auto got = detached.localParam(static_cast<int32_t>(i), r);
      const auto want = reference.localParam(static_cast<int32_t>(i), r);
      REQUIRE(got);
      CHECK(got->data == want->data);
    }
  }
  // Every byte read back went through copyToHost.
  CHECK(counters.copiedBytes == paramBytes);

  std::vector<runtime::PhaseReport> reports;
  counters.copiedBytes = 0;
  counters.entered = 0;  // localParam enters the rank too
  const std::vector<runtime::HostTensor> want = reference.forward(inputs, reports);
  const std::vector<runtime::HostTensor> got = detached.forward(inputs, reports);
  REQUIRE(got.size() == want.size());
  int64_t outputBytes = 0;
  for (size_t o = 0; o < got.size(); ++o) {
    CHECK(got[o].data == want[o].data);
    outputBytes += static_cast<int64_t>(got[o].data.size());
  }
  CHECK(counters.copiedBytes == n * outputBytes);  // every rank's outputs
  CHECK(counters.entered == n);
  for (const runtime::PhaseReport &report : reports)
    CHECK(report.peakBytes == report.predictedPeakBytes);

  // Save: each rank's params are staged on the host, then written.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("shardc-session-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  counters.copiedBytes = 0;
  counters.communicators = 0;
  reference.save((dir / "reference.safetensors").string());
  detached.save((dir / "detached.save.safetensors").string());
  CHECK(counters.copiedBytes == paramBytes);
  // The writer's collectives moved host values through the session's host
  // communicator, never the rank's device one.
  CHECK(counters.communicators == 0);
  const std::string saved = readAll((dir / "detached.save.safetensors").string());
  CHECK(!saved.empty());
  CHECK(saved == readAll((dir / "reference.safetensors").string()));
  std::filesystem::remove_all(dir);
}
