// Section `local` of shardc-gpu-tests (Sections.h): several ranks on one
// GPU through DeviceLocalCommunicator (NCCL refuses that).
#include "GpuCheck.h"
#include "GpuRuns.h"
#include "Sections.h"
#include "TestPlans.h"

#include "runtime/LocalCommunicator.h"
#include "runtime/RuntimeError.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/CudaInit.h"
#include "runtime/cuda/DeviceLocalCommunicator.h"

#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace shardc::gpucheck {
using namespace shardc::runtime;

namespace {

void collectivesRoundTrip(int n) {
  // all_gather, unit all_gather, scatter, barrier with device buffers, odd
  // byte counts, each rank its own CudaDevice (stream) on device 0.
  LocalGroup group(n, std::chrono::seconds(30));
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        cuda::CudaDevice device(0);
        cuda::DeviceLocalCommunicator comm(group, r, device);
        const size_t chunk = 100003;
        std::vector<uint8_t> mine(chunk);
        for (size_t i = 0; i < chunk; ++i) mine[i] = static_cast<uint8_t>(i * 31 + r * 7);
        DeviceBytes send(device, chunk, "send"), all(device, chunk * n, "all"),
            half(device, chunk / 2 * n, "half"), part(device, chunk, "part");
        cuda::copyToDevice(device, send.data(), mine.data(), chunk);
        comm.allGather(send.data(), chunk, all.data());
        const std::vector<std::byte> got = download(device, all.data(), chunk * n);
        for (int p = 0; p < n; ++p)
          for (size_t i = 0; i < chunk; i += 997)
            if (static_cast<uint8_t>(got[p * chunk + i]) != static_cast<uint8_t>(i * 31 + p * 7))
              throw RuntimeError("all_gather: wrong byte from rank " + std::to_string(p));
        cuda::zeroBytes(device, all.data(), static_cast<int64_t>(chunk) * n);
        comm.allGatherMany({{send.data(), chunk / 2, half.data()}, {send.data(), chunk, all.data()}});
        if (download(device, all.data(), chunk * n) != got) throw RuntimeError("all_gather_many: second part differs");
        const std::vector<std::byte> halves = download(device, half.data(), chunk / 2 * n);
        for (int p = 0; p < n; ++p)
          if (std::memcmp(&halves[p * (chunk / 2)], &got[p * chunk], chunk / 2) != 0)
            throw RuntimeError("all_gather_many: first part differs for rank " + std::to_string(p));
        const int root = n - 1;
        comm.scatter(root, r == root ? all.data() : nullptr, chunk, part.data());
        if (download(device, part.data(), chunk) !=
            std::vector<std::byte>(reinterpret_cast<const std::byte *>(mine.data()),
                                   reinterpret_cast<const std::byte *>(mine.data()) + chunk))
          throw RuntimeError("scatter: wrong bytes");
        comm.barrier();
      } catch (const std::exception &e) {
        errors[static_cast<size_t>(r)] = e.what();
        group.abort(e.what());
      }
    });
  for (auto &t : threads) t.join();
  std::string all;
  for (int r = 0; r < n; ++r)
    if (!errors[static_cast<size_t>(r)].empty()) all += "rank " + std::to_string(r) + ": " + errors[static_cast<size_t>(r)] + "; ";
  report("local", "collectives, N=" + std::to_string(n), all.empty(),
         all.empty() ? "all_gather, unit all_gather, scatter, barrier: right bytes" : all);
}

void seedCase(int64_t n) {
  const plan::Plan plan = test::seedPlan(n);
  HostTensor x{"x", plan::DType::F32, {1}, std::vector<std::byte>(4)};
  const float xv = 0.5f;
  std::memcpy(x.data.data(), &xv, 4);
  // runLocal checks that every rank's outputs are byte-identical.
  const RunResult run = runOnGpuRanks(plan, 0, {x});
  std::string bad;
  int64_t sumAfter = 0;
  for (const RankReport &rank : run.ranks) {
    const PhaseReport &forward = *rank.forward;
    if (rank.init.peakBytes != rank.init.predictedPeakBytes ||
        forward.peakBytes != forward.predictedPeakBytes ||
        forward.liveAtPeak != forward.predictedLiveAtPeak ||
        forward.endBytes != forward.predictedEndBytes)
      bad += "rank " + std::to_string(rank.rank) + ": forward peak " +
             std::to_string(forward.peakBytes) + " predicted " +
             std::to_string(forward.predictedPeakBytes) + "; ";
    sumAfter += forward.endBytes;
  }
  bool values = run.outputs.size() == 1 && run.outputs[0].data.size() == 1024 * 1024 * 4;
  for (size_t i = 0; values && i < run.outputs[0].data.size(); i += 4096) {
    float v;
    std::memcpy(&v, &run.outputs[0].data[i], 4);
    values = v == 1.5f;
  }
  if (!values) bad += "y != 1.5; ";
  if (!run.driverBytesAfterForward) bad += "no cudaMemGetInfo reading after forward; ";
  const RankReport &r0 = run.ranks[0];
  char text[512];
  std::snprintf(text, sizeof text,
                "per rank: init peak %lld, forward peak %lld, after forward %lld B (predicted %lld; "
                "Thunder fsdp(jit) 10,486,272, jit(fsdp) 6,291,968 at N=2); cudaMemGetInfo, all %lld "
                "ranks: %lld B used vs %lld B live in the ledgers",
                static_cast<long long>(r0.init.peakBytes), static_cast<long long>(r0.forward->peakBytes),
                static_cast<long long>(r0.forward->endBytes),
                static_cast<long long>(r0.forward->predictedEndBytes), static_cast<long long>(n),
                static_cast<long long>(run.driverBytesAfterForward.value_or(-1)),
                static_cast<long long>(sumAfter));
  report("local", "seed case N=" + std::to_string(n) + " on one GPU", bad.empty(),
         bad.empty() ? text : bad);
}

}  // namespace

void deviceLocalChecks() {
  for (int n : {2, 3, 8}) guarded("local", "collectives, N=" + std::to_string(n), [&] { collectivesRoundTrip(n); });
  for (int64_t n : {2, 4, 8}) guarded("local", "seed case N=" + std::to_string(n), [&] { seedCase(n); });
}

}  // namespace shardc::gpucheck
