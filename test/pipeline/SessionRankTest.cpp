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
#include "runtime/PlanQueries.h"
#include "runtime/RankSubset.h"
#include "tools/shardc/RunReport.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <unistd.h>

using namespace shardc;

namespace {

/// Counts what the session asks of it; its storage is "not host memory".
/// With `driver`, the ranks report a device name and a driver's count: the
/// live bytes of every rank's device together (as cudaMemGetInfo counts
/// every rank sharing a GPU), read by one rank while the others wait.
struct Counters {
  std::atomic<int> entered{0}, communicators{0};
  std::atomic<int64_t> copiedBytes{0}, peerCopiedBytes{0};
  bool driver = false;
  std::vector<const runtime::Device *> devices;  // every rank's, when `driver`
  std::atomic<int> driverReadings{0};
};

/// memcpy, counted: the bytes a rank's device moves between ranks.
class CountingCopier final : public runtime::PeerCopier {
public:
  explicit CountingCopier(Counters &counters) : counters_(counters) {}
  void copy(void *dst, const void *src, size_t bytes) override {
    counters_.peerCopiedBytes += static_cast<int64_t>(bytes);
    runtime::hostCopier().copy(dst, src, bytes);
  }

private:
  Counters &counters_;
};

class DetachedRank final : public runtime::SessionRank {
public:
  static std::unique_ptr<runtime::SessionRank> make(int64_t rank, Counters &counters) {
    auto device = std::make_unique<runtime::CpuDevice>();
    auto backend = std::make_unique<runtime::CpuBackend>(*device, 1);
    return std::unique_ptr<runtime::SessionRank>(
        new DetachedRank(rank, std::move(device), std::move(backend), counters));
  }
  /// Like a GPU rank's, this copier moves device memory only: the session
  /// must not hand it host values (a save's bookkeeping). Each communicator
  /// of the rank asks for it once.
  runtime::PeerCopier &copier() override {
    ++counters_.communicators;
    return copier_;
  }
  void enterThread() override { ++counters_.entered; }
  bool hostAddressable() const override { return false; }
  std::string deviceName() const override {
    return counters_.driver ? "fake-gpu:0" : SessionRank::deviceName();
  }
  std::optional<int64_t> driverUsedBytes() override {
    if (!counters_.driver) return std::nullopt;
    ++counters_.driverReadings;
    int64_t used = 0;
    for (const runtime::Device *device : counters_.devices) used += device->currentBytes();
    return used;
  }
  void copyToHost(void *hostDst, const void *src, size_t bytes) override {
    counters_.copiedBytes += static_cast<int64_t>(bytes);
    SessionRank::copyToHost(hostDst, src, bytes);
  }

private:
  DetachedRank(int64_t rank, std::unique_ptr<runtime::CpuDevice> device,
               std::unique_ptr<runtime::CpuBackend> backend, Counters &counters)
      : SessionRank(rank, std::move(device), std::move(backend)), counters_(counters),
        copier_(counters) {
    if (counters.driver) counters.devices.push_back(&this->device());
  }
  Counters &counters_;
  CountingCopier copier_;
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

// runLocal (the CLI's one-shot run) takes the same factory: `shardc run
// --device cuda` is runLocal on GPU ranks. On ranks whose storage is "not
// host memory" every figure and byte must equal the CPU default's, every
// read of device memory must go through copyToHost, and a --ranks subset's
// scatters must move their bytes with the rank's copier.
TEST_CASE("runLocal: ranks from a factory whose storage is not host memory",
          "[pipeline][session][ranks]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("shardc-runlocal-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Counters counters;
  const runtime::SessionRankFactory detached = [&](int64_t rank) {
    return DetachedRank::make(rank, counters);
  };

  SECTION("init, forward, repeats, shards, full params and the saved file") {
    const compiler::Graph graph = test::loadExample("llama-tiny");
    const plan::Plan plan = test::compileForTest(graph, 3);
    runtime::RunOptions options;
    options.seed = 5;
    options.threads = 1;
    options.inputs = runtime::makeDeterministicInputs(plan, 4, compiler::inputBounds(graph));
    options.keepShards = true;
    options.gatherParams = true;
    options.forwardRepeats = 1;
    options.savePath = (dir / "reference.safetensors").string();
    const runtime::RunResult want = runtime::runLocal(plan, options);
    options.savePath = (dir / "detached.safetensors").string();
    const runtime::RunResult got = runtime::runLocal(plan, options, detached);

    CHECK(got.device == "cpu");
    CHECK_FALSE(got.driverBytesHoldingShards);  // a CPU rank has no driver count
    REQUIRE(got.ranks.size() == 3);
    for (size_t r = 0; r < got.ranks.size(); ++r) {
      const runtime::RankReport &g = got.ranks[r], &w = want.ranks[r];
      CHECK(g.paramBytes == w.paramBytes);
      CHECK(g.init.peakBytes == g.init.predictedPeakBytes);
      REQUIRE(g.forward);
      CHECK(g.forward->peakBytes == g.forward->predictedPeakBytes);
      CHECK(g.forward->liveAtPeak == w.forward->liveAtPeak);
      CHECK(g.repeats.size() == 1);
      for (size_t p = 0; p < plan.params.size(); ++p)
        CHECK(got.shards[r][p].data == want.shards[r][p].data);
    }
    REQUIRE(got.outputs.size() == want.outputs.size());
    for (size_t o = 0; o < got.outputs.size(); ++o) CHECK(got.outputs[o].data == want.outputs[o].data);
    REQUIRE(got.params.size() == want.params.size());
    for (size_t p = 0; p < got.params.size(); ++p) CHECK(got.params[p].data == want.params[p].data);
    const std::string saved = readAll((dir / "detached.safetensors").string());
    CHECK(!saved.empty());
    CHECK(saved == readAll((dir / "reference.safetensors").string()));

    // What crossed from "device" to host, all through copyToHost: shards,
    // outputs of both forwards on every rank, the full params (rank 0 keeps
    // them, every rank copies), and each rank's params staged for the save.
    int64_t shardBytes = 0, outputBytes = 0, fullBytes = 0;
    for (const auto &rank : got.shards)
      for (const runtime::HostTensor &t : rank) shardBytes += static_cast<int64_t>(t.data.size());
    for (const runtime::HostTensor &t : got.outputs) outputBytes += static_cast<int64_t>(t.data.size());
    for (const runtime::HostTensor &t : got.params) fullBytes += static_cast<int64_t>(t.data.size());
    CHECK(counters.copiedBytes == 2 * shardBytes + 2 * 3 * outputBytes + 3 * fullBytes);
    CHECK(counters.entered == 3);
  }

  SECTION("some ranks of a larger world: scatters through the rank's copier") {
    // Orthogonal weights are not shardable: one owner computes each and
    // scatters it, or, when the owner is not run, the ranks run compute it
    // themselves and copy their rows out.
    plan::Plan plan = test::compileForTest(test::loadExample("orthogonal"), 4);
    plan.functions.erase(std::remove_if(plan.functions.begin(), plan.functions.end(),
                                        [](const plan::Function &f) { return f.name != "init"; }),
                         plan.functions.end());
    runtime::RunOptions options;
    options.seed = 3;
    options.keepShards = true;
    const runtime::RunResult full = runtime::runLocal(plan, options);
    // Each scatter moves one rank's rows to each rank run, nothing else:
    // the bookkeeping (root's pointer) must not go through a device copier.
    int64_t scatteredRowBytes = 0;
    for (const runtime::ScatteredParam &s : runtime::scatteredParams(plan))
      for (const plan::Param &p : plan.params)
        if (p.name == s.name) scatteredRowBytes += p.localBytes();
    REQUIRE(scatteredRowBytes > 0);
    for (const std::vector<int64_t> &ranks : std::vector<std::vector<int64_t>>{{0, 2}, {3}}) {
      INFO("ranks " << runtime::formatRankList(ranks));
      options.ranks = ranks;
      options.savePath = (dir / "part.safetensors").string();
      const runtime::RunResult want = runtime::runLocal(plan, options);
      options.savePath = (dir / "part-detached.safetensors").string();
      counters.peerCopiedBytes = 0;
      const runtime::RunResult got = runtime::runLocal(plan, options, detached);
      CHECK(counters.peerCopiedBytes == scatteredRowBytes * static_cast<int64_t>(ranks.size()));
      REQUIRE(got.shards.size() == ranks.size());
      for (size_t i = 0; i < ranks.size(); ++i)
        for (size_t p = 0; p < plan.params.size(); ++p)
          CHECK(got.shards[i][p].data == full.shards[ranks[i]][p].data);
      CHECK(readAll((dir / "part-detached.safetensors").string()) ==
            readAll((dir / "part.safetensors").string()));
    }
  }
  std::filesystem::remove_all(dir);
}

// A device with a driver's count (a GPU: cudaMemGetInfo, every rank on it
// together) gets two readings from runLocal, each taken by one rank while
// the others wait: while every rank holds only its shards, and after the
// measured forward with its outputs live. Here the "driver" sums the ranks'
// ledgers, so the readings must equal the ledgers' sums exactly; the
// report names the device and prints both beside the ledgers.
TEST_CASE("runLocal: a device driver's count, read while every rank waits, and its report",
          "[pipeline][session]") {
  const compiler::Graph graph = test::loadExample("gpt2-tiny");
  const plan::Plan plan = test::compileForTest(graph, 4);
  runtime::RunOptions options;
  options.threads = 1;
  options.inputs = runtime::makeDeterministicInputs(plan, 2, compiler::inputBounds(graph));
  Counters counters;
  counters.driver = true;
  const runtime::RunResult run = runtime::runLocal(
      plan, options, [&](int64_t rank) { return DetachedRank::make(rank, counters); });

  CHECK(run.device == "fake-gpu:0");
  CHECK(counters.driverReadings == 3);  // before, after init, after forward
  int64_t held = 0, afterForward = 0;
  for (const runtime::RankReport &rank : run.ranks) {
    held += rank.paramBytes;
    afterForward += rank.forward->endBytes;
  }
  REQUIRE(run.driverBytesHoldingShards);
  CHECK(*run.driverBytesHoldingShards == held);
  REQUIRE(run.driverBytesAfterForward);
  CHECK(*run.driverBytesAfterForward == afterForward);
  CHECK(afterForward > held);  // the outputs are live

  const cli::RunSummary summary{"gpt2-tiny.json", 0, &plan, &run, {}};
  const std::string text = cli::formatTextReport(summary);
  CHECK_THAT(text, Catch::Contains("4 local rank(s) on fake-gpu:0, seed 0"));
  CHECK_THAT(text, Catch::Contains("device memory (the driver's count, cudaMemGetInfo): "));
  CHECK_THAT(text, Catch::Contains("(the ledgers count fake-gpu:0's memory)"));
  CHECK_THAT(text, Catch::Contains("device memory after forward (outputs live): "));
  const std::string json = cli::formatJsonReport(summary);
  CHECK_THAT(json, Catch::Contains("\"device\": \"fake-gpu:0\""));
  CHECK_THAT(json, Catch::Contains("\"driver_bytes_holding_shards\": " + std::to_string(held)));
  CHECK_THAT(json,
             Catch::Contains("\"driver_bytes_after_forward\": " + std::to_string(afterForward)));

  // On the CPU: no driver, no such lines.
  const runtime::RunResult cpu = runtime::runLocal(plan, options);
  const std::string cpuText = cli::formatTextReport({"gpt2-tiny.json", 0, &plan, &cpu, {}});
  CHECK_THAT(cpuText, !Catch::Contains("driver's count"));
  CHECK_THAT(cli::formatJsonReport({"gpt2-tiny.json", 0, &plan, &cpu, {}}),
             Catch::Contains("\"driver_bytes_holding_shards\": null"));
}
