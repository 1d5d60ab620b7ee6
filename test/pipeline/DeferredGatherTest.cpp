// Gathers that overlap compute (Communicator::defersGathers, NCCL's way):
// the executor core starts every all_gather and waits only before the first
// instruction that touches its buffers. Here a communicator defers for
// real: it poisons the receive bytes when a gather starts and moves the
// bytes only when waited for. Any instruction that read a gathered buffer
// (or freed it, or wrote a send buffer) before the wait would change the
// outputs, which must equal the synchronous run's byte for byte; and with
// --prefetch, compute must run between a gather's start and its wait.
#include "PipelineTestSupport.h"
#include "runtime/CpuBackend.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/LocalRun.h"
#include "runtime/RankThreads.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>

using namespace shardc;

namespace {

struct Counts {
  std::atomic<int64_t> linears{0};     // linear kernels run, every rank
  std::atomic<int64_t> started{0};     // gathers started
  std::atomic<int64_t> waited{0};      // gathers completed by a wait
  std::atomic<int64_t> overlapped{0};  // ... with a linear run in between
};

/// The CPU backend, counting its linear kernels.
class CountingBackend final : public runtime::CpuBackend {
public:
  CountingBackend(runtime::CpuDevice &device, Counts &counts)
      : CpuBackend(device, 1), counts_(counts) {}
  void linear(const runtime::KTensor &x, const runtime::KTensor &w, const runtime::KTensor *b,
              const runtime::KTensor &y) override {
    ++counts_.linears;
    CpuBackend::linear(x, w, b, y);
  }

private:
  Counts &counts_;
};

/// Leaves every gather in flight until waited for: the receive bytes hold
/// poison until then. Other collectives first complete the gathers in
/// flight, in order (as one NCCL stream does).
class DeferringCommunicator final : public runtime::Communicator {
public:
  DeferringCommunicator(runtime::LocalGroup &group, int64_t rank, Counts &counts)
      : inner_(group, rank), counts_(counts) {}

  int64_t rank() const override { return inner_.rank(); }
  int64_t worldSize() const override { return inner_.worldSize(); }
  bool defersGathers() const override { return true; }
  void startAllGatherMany(const std::vector<runtime::AllGatherPart> &parts) override {
    for (const runtime::AllGatherPart &part : parts)
      std::memset(part.recv, 0xa5, part.bytesPerRank * static_cast<size_t>(worldSize()));
    inFlight_.push_back({parts, counts_.linears.load()});
    ++counts_.started;
  }
  void waitGathers() override {
    for (const Started &gather : inFlight_) {
      inner_.allGatherMany(gather.parts);
      ++counts_.waited;
      if (counts_.linears.load() > gather.linearsAtStart) ++counts_.overlapped;
    }
    inFlight_.clear();
  }
  void allGather(const void *send, size_t bytesPerRank, void *recv) override {
    waitGathers();
    inner_.allGather(send, bytesPerRank, recv);
  }
  void allGatherMany(const std::vector<runtime::AllGatherPart> &parts) override {
    waitGathers();
    inner_.allGatherMany(parts);
  }
  void scatter(int64_t root, const void *send, size_t bytesPerRank, void *recv) override {
    waitGathers();
    inner_.scatter(root, send, bytesPerRank, recv);
  }
  void barrier() override {
    waitGathers();
    inner_.barrier();
  }
  std::chrono::duration<double> timeout() const override { return inner_.timeout(); }
  void setTimeout(std::chrono::duration<double> timeout) override { inner_.setTimeout(timeout); }

private:
  struct Started {
    std::vector<runtime::AllGatherPart> parts;
    int64_t linearsAtStart;
  };
  runtime::LocalCommunicator inner_;
  Counts &counts_;
  std::vector<Started> inFlight_;
};

/// Init then forward on every rank (threads); rank 0's outputs. With
/// `counts`, through the deferring communicator.
std::vector<runtime::HostTensor> runRanks(const plan::Plan &plan,
                                          const std::vector<runtime::HostTensor> &inputs,
                                          Counts *counts) {
  const int64_t n = plan.worldSize;
  Counts unused;
  Counts &c = counts ? *counts : unused;
  std::vector<std::vector<runtime::HostTensor>> outputs(n);
  runtime::LocalGroup group(n);
  runtime::runRankThreads(group, n, [&](int64_t r) {
    runtime::CpuDevice device;
    CountingBackend backend(device, c);
    runtime::RankState state(r);
    runtime::LocalCommunicator plain(group, r);
    DeferringCommunicator deferring(group, r, c);
    runtime::Communicator &comm =
        counts ? static_cast<runtime::Communicator &>(deferring) : plain;
    try {
      runtime::runFunction(plan, "init", backend, comm, state, {}, 3, "test");
      state.releaseFunctionBuffers();
      for (const runtime::TensorView &view :
           runtime::runFunction(plan, "forward", backend, comm, state, inputs, 3, "test"))
        outputs[r].push_back(view.toHost());
    } catch (...) {
      state.releaseAll();
      throw;
    }
    state.releaseAll();
  });
  for (int64_t r = 1; r < n; ++r) REQUIRE(outputs[r].size() == outputs[0].size());
  return outputs[0];
}

}  // namespace

TEST_CASE("gathers left in flight are waited for before their buffers are touched",
          "[pipeline][gather][prefetch]") {
  for (const char *model : {"llama-tiny", "gpt2-tiny"})
    for (int64_t n : {2, 3})
      for (const bool prefetch : {false, true}) {
        INFO(model << " N=" << n << (prefetch ? " --prefetch" : ""));
        const compiler::Graph graph = test::loadExample(model);
        compiler::ShardOptions options;
        options.prefetch = prefetch;
        const plan::Plan plan = test::compileForTest(graph, n, options);
        const std::vector<runtime::HostTensor> inputs =
            runtime::makeDeterministicInputs(plan, 1, compiler::inputBounds(graph));
        const std::vector<runtime::HostTensor> want = runRanks(plan, inputs, nullptr);
        Counts counts;
        const std::vector<runtime::HostTensor> got = runRanks(plan, inputs, &counts);
        REQUIRE(got.size() == want.size());
        for (size_t o = 0; o < got.size(); ++o) CHECK(got[o].data == want[o].data);
        CHECK(counts.started > 0);
        CHECK(counts.waited == counts.started);  // every gather completed
        // Prefetched gathers ran while the previous unit computed.
        if (prefetch) CHECK(counts.overlapped > 0);
      }
}
