#include "runtime/mpi/MpiRun.h"

#include "runtime/CpuBackend.h"
#include "runtime/DataParallel.h"
#include "runtime/Executor.h"
#include "runtime/Kernels.h"
#include "runtime/MemoryModel.h"
#include "runtime/PlanCheck.h"
#include "runtime/PlanJson.h"
#include "runtime/checkpoint/CooperativeWriter.h"
#include "runtime/RuntimeError.h"
#include "runtime/mpi/MpiCommunicator.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

namespace shardc::runtime::mpi {
using namespace shardc::plan;

namespace {

int64_t localSize = 1, localRank = 0;
char termMessage[160];  // "shardc: error: rank R: " prefix for the handler
size_t termPrefixLength = 0;

void appendRaw(char *out, size_t &length, size_t capacity, const char *text) {
  while (*text && length + 1 < capacity) out[length++] = *text++;
}

/// mpirun kills every rank (SIGTERM) when one fails; say where this one was.
/// Async-signal-safe: only write() and _exit().
extern "C" void onTerminate(int signal) {
  char message[512];
  size_t length = 0;
  appendRaw(message, length, sizeof message, termMessage);
  appendRaw(message, length, sizeof message, "terminated by signal ");
  char number[8];
  int n = signal, digits = 0;
  do number[digits++] = static_cast<char>('0' + n % 10); while ((n /= 10) && digits < 7);
  while (digits) { message[length++] = number[--digits]; }
  const char *where = currentCollective.load();
  appendRaw(message, length, sizeof message, where ? " while waiting in " : " while computing");
  if (where) appendRaw(message, length, sizeof message, where);
  appendRaw(message, length, sizeof message,
            " (the MPI launcher ends the job when a rank fails; its message names that rank)\n");
  ssize_t ignored = write(STDERR_FILENO, message, length);
  (void)ignored;
  _exit(128 + signal);
}

uint64_t fnv1a(uint64_t hash, const void *data, size_t bytes) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ULL;

/// Orders the inputs like forward's input list (RunCommand has checked
/// names, dtypes and shapes; the local backend checks them again itself).
std::vector<HostTensor> orderInputs(const Function &forward, const std::vector<HostTensor> &given) {
  std::vector<HostTensor> ordered;
  for (int32_t id : forward.inputs) {
    const Buffer &b = forward.buffers[id];
    auto match = std::find_if(given.begin(), given.end(),
                              [&](const HostTensor &t) { return t.name == b.name; });
    if (match == given.end())
      throw RuntimeError("forward input '" + b.name + "' was not provided");
    if (match->dtype != b.dtype || match->shape != b.shape ||
        static_cast<int64_t>(match->data.size()) != match->expectedBytes())
      throw RuntimeError("input '" + b.name + "' does not match forward's " + dtypeName(b.dtype) +
                         " " + shapeToString(b.shape));
    ordered.push_back(*match);
  }
  return ordered;
}

nlohmann::json liveToJson(const std::vector<LiveAllocation> &live) {
  nlohmann::json out = nlohmann::json::array();
  for (const LiveAllocation &a : live)
    out.push_back({a.label, static_cast<int>(a.category), a.bytes});
  return out;
}

std::vector<LiveAllocation> liveFromJson(const nlohmann::json &in) {
  std::vector<LiveAllocation> out;
  for (const auto &a : in)
    out.push_back({a[0].get<std::string>(), static_cast<Category>(a[1].get<int>()),
                   a[2].get<int64_t>()});
  return out;
}

nlohmann::json phaseToJson(const PhaseReport &p) {
  return {{"peak", p.peakBytes},
          {"live", liveToJson(p.liveAtPeak)},
          {"by_category", p.peakByCategory},
          {"end", p.endBytes},
          {"predicted_peak", p.predictedPeakBytes},
          {"predicted_live", liveToJson(p.predictedLiveAtPeak)},
          {"predicted_end", p.predictedEndBytes},
          {"seconds", p.seconds}};
}

PhaseReport phaseFromJson(const nlohmann::json &j) {
  PhaseReport p;
  p.peakBytes = j["peak"];
  p.liveAtPeak = liveFromJson(j["live"]);
  p.peakByCategory = j["by_category"].get<CategoryBytes>();
  p.endBytes = j["end"];
  p.predictedPeakBytes = j["predicted_peak"];
  p.predictedLiveAtPeak = liveFromJson(j["predicted_live"]);
  p.predictedEndBytes = j["predicted_end"];
  p.seconds = j["seconds"];  // each process's own wall time, not rank 0's
  return p;
}



/// Data-parallel outputs: every rank's rows of every forward output,
/// gathered to rank 0 in rank order (each rank sends rank 0's row count,
/// padded, so one fixed-size gather per output serves uneven slices).
std::vector<HostTensor> gatherBatchOutputs(const Plan &plan, MpiCommunicator &comm,
                                           int64_t globalRows,
                                           const std::vector<HostTensor> &mine) {
  const Function &forward = *plan.function("forward");
  const int64_t n = comm.worldSize();
  const int64_t firstRows = batchSlice(globalRows, n, 0).rows;
  std::vector<HostTensor> result;
  for (size_t i = 0; i < forward.outputs.size(); ++i) {
    const Buffer &b = forward.buffers[forward.outputs[i]];
    if (b.replicated) {  // the same on every rank (a gradient norm): rank 0's
      if (comm.rank() == 0 && i < mine.size()) result.push_back(mine[i]);
      continue;
    }
    if (b.shape.empty()) {  // each rank's share of a loss: summed in rank order
      HostTensor share{b.name, b.dtype, {}, std::vector<std::byte>(dtypeSize(b.dtype))};
      if (i < mine.size()) share.data = mine[i].data;
      std::vector<std::byte> all(comm.rank() == 0 ? share.data.size() * static_cast<size_t>(n) : 0);
      comm.gather(0, share.data.data(), share.data.size(), all.data());
      if (comm.rank() != 0) continue;
      std::vector<HostTensor> shares(static_cast<size_t>(n), share);
      std::vector<const HostTensor *> views;
      for (int64_t r = 0; r < n; ++r) {
        std::memcpy(shares[r].data.data(), all.data() + static_cast<size_t>(r) * share.data.size(),
                    share.data.size());
        if (batchSlice(globalRows, n, r).rows > 0) views.push_back(&shares[r]);
      }
      result.push_back(sumRankShares(views));
      continue;
    }
    const size_t rowBytes =
        static_cast<size_t>(numElements(b.shape) * dtypeSize(b.dtype) / firstRows);
    std::vector<std::byte> send(rowBytes * static_cast<size_t>(firstRows));
    if (i < mine.size()) std::memcpy(send.data(), mine[i].data.data(), mine[i].data.size());
    std::vector<std::byte> all(comm.rank() == 0 ? send.size() * static_cast<size_t>(n) : 0);
    comm.gather(0, send.data(), send.size(), all.data());
    if (comm.rank() != 0) continue;
    HostTensor out{b.name, b.dtype, b.shape, {}};
    out.shape[0] = globalRows;
    for (int64_t r = 0; r < n; ++r) {
      const std::byte *from = all.data() + static_cast<size_t>(r) * send.size();
      out.data.insert(out.data.end(), from,
                      from + static_cast<size_t>(batchSlice(globalRows, n, r).rows) * rowBytes);
    }
    result.push_back(std::move(out));
  }
  return result;
}

}  // namespace

int64_t initialize() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // Only the main thread calls MPI; kernels use threads that never do.
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw RuntimeError("MPI_Init_thread failed");
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    int size = 1;
    MPI_Comm_size(local, &size);
    localSize = size;
    int mine = 0;
    MPI_Comm_rank(local, &mine);
    localRank = mine;
    MPI_Comm_free(&local);
    std::snprintf(termMessage, sizeof termMessage, "shardc: error: rank %lld: ",
                  static_cast<long long>(worldRank()));
    termPrefixLength = std::strlen(termMessage);
    struct sigaction action {};
    action.sa_handler = onTerminate;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
  }
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int64_t worldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int64_t nodeLocalSize() { return localSize; }
int64_t nodeLocalRank() { return localRank; }

void abortWorld(int code) {
  currentCollective.store("MPI_Abort, after the error above");
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; be sure anyway
}

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int64_t peakRssBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
}

namespace {

/// The CPU: one CpuDevice and CpuBackend, collectives over MPI.
MpiRankRuntime cpuRankRuntime(int threads) {
  MpiRankRuntime rank;
  auto device = std::make_unique<CpuDevice>();
  rank.backend = std::make_unique<CpuBackend>(*device, threads);
  rank.device = std::move(device);
  return rank;
}

/// Replicated ranks compute identical outputs: a hash of each rank's,
/// compared on every rank.
void checkSameOnEveryRank(MpiCommunicator &comm, const std::vector<HostTensor> &outputs,
                          const std::string &what) {
  uint64_t hash = kFnvBasis;
  for (const HostTensor &t : outputs) hash = fnv1a(hash, t.data.data(), t.data.size());
  std::vector<uint64_t> all = comm.allGatherU64(hash);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw RuntimeError(what + " outputs differ between rank 0 and rank " + std::to_string(r) +
                         " (ranks must compute identical outputs)");
}

}  // namespace

MpiRunResult runMpi(const Plan &plan, const RunOptions &options,
                    const MpiRankFactory &rankRuntime) {
  checkPlan(plan);
  MpiCommunicator comm(MPI_COMM_WORLD, options.timeout);
  const int64_t rank = comm.rank(), n = comm.worldSize();
  if (plan.worldSize != n)
    throw RuntimeError("the plan was compiled for " + std::to_string(plan.worldSize) +
                       " ranks but MPI runs " + std::to_string(n) + " processes");
  if (!plan.function("init")) throw RuntimeError("runMpi: plan has no 'init' function");
  const Function *forward = plan.function("forward");
  std::vector<HostTensor> inputs;
  if (forward && options.dataParallel) inputs = matchGlobalInputs(plan, options.inputs);
  else if (forward) inputs = orderInputs(*forward, options.inputs);
  else if (!options.inputs.empty())
    throw RuntimeError("inputs were given but the plan has no 'forward' function");

  // Every rank compiled its own plan: check they are the same program, run
  // with the same seed on the same inputs (mismatched binaries or files).
  {
    uint64_t hash = kFnvBasis;
    const std::string text = planToJson(plan);
    hash = fnv1a(hash, text.data(), text.size());
    hash = fnv1a(hash, &options.seed, sizeof options.seed);
    for (const HostTensor &t : inputs) hash = fnv1a(hash, t.data.data(), t.data.size());
    std::vector<uint64_t> all = comm.allGatherU64(hash);
    for (int64_t r = 0; r < n; ++r)
      if (all[r] != all[0])
        throw RuntimeError("rank " + std::to_string(r) +
                           " compiled a different plan, or has a different seed or inputs, "
                           "than rank 0 (every process must run the same shardc on the same "
                           "MODEL.json, options and --inputs file)");
  }

  MpiRunResult result;
  RankReport report;
  report.rank = rank;
  // This rank's forward: the plan's, or its own micro-batch's.
  RankForward mineForward{"forward", {}, {}};
  if (forward && options.dataParallel) mineForward = rankForward(plan, inputs, rank);
  // Training steps (RunOptions::moreStepInputs): step k's batch, this
  // rank's rows of it with dataParallel.
  std::vector<std::vector<HostTensor>> batches{options.dataParallel ? mineForward.inputs : inputs};
  if (!options.moreStepInputs.empty() && !options.trainingSteps)
    throw RuntimeError("runMpi: more step inputs are for training steps");
  for (size_t k = 0; k < options.moreStepInputs.size() && forward; ++k) {
    const std::vector<HostTensor> &given = options.moreStepInputs[k];
    if (!options.dataParallel) {
      batches.push_back(orderInputs(*forward, given));
      continue;
    }
    RankForward mine = rankForward(plan, matchGlobalInputs(plan, given), rank);
    if (mine.function != mineForward.function)
      throw RuntimeError("data-parallel: step input set " + std::to_string(k + 2) +
                         " holds another global batch than the first");
    batches.push_back(std::move(mine.inputs));
  }
  MemoryPrediction initPrediction = predictMemory(plan, "init", rank);
  predict(initPrediction, report.init);
  if (forward) {
    report.forward.emplace();
    predict(predictMemory(plan, mineForward.function, rank, initPrediction.paramsAtEnd),
            *report.forward);
  }

  ExecutionContext context;
  context.seed = options.seed;
  context.threads = static_cast<int>(std::max<int64_t>(
      1, static_cast<int64_t>(std::thread::hardware_concurrency()) / std::max<int64_t>(1, localSize)));
  ProcessMemory memory;
  std::vector<HostTensor> outputs, params;

  MpiRankRuntime runtime = rankRuntime ? rankRuntime(comm) : cpuRankRuntime(context.threads);
  Device &device = *runtime.device;
  Backend &backend = *runtime.backend;
  Communicator &collectives = runtime.collectives ? *runtime.collectives : comm;
  // The CPU's block cache and statistics; none elsewhere.
  RankState state(rank);  // after the runtime: released before its device
  auto *cpu = dynamic_cast<CpuDevice *>(&device);
  auto trim = [&] {
    if (cpu) cpu->trimReuseCache();
  };
  auto blocks = [&] { return cpu ? cpu->largeBlockStats() : HostMemory::Stats{}; };
  auto run = [&](const std::string &function, const std::vector<HostTensor> &functionInputs) {
    return runFunction(plan, function, backend, collectives, state, functionInputs, context.seed,
                       "executeFunction");
  };
  /// A host copy of a param's local storage (its bytes are device memory
  /// unless runtime.hostAddressable).
  auto hostCopy = [&](const DeviceBuffer &buffer) {
    std::vector<std::byte> bytes(static_cast<size_t>(buffer.bytes()));
    if (!bytes.empty()) backend.copyToHost(bytes.data(), buffer.data(), bytes.size());
    return bytes;
  };
  try {
    device.resetPeak();
    auto initStart = std::chrono::steady_clock::now();
    run("init", {});
    report.init.seconds = secondsSince(initStart);
    measure(device, blocks(), report.init);
    state.releaseFunctionBuffers();
    trim();
    report.paramBytes = device.currentBytes(Category::Parameter);
    memory.peakRssAfterInit = peakRssBytes();

    if (const char *die = std::getenv("SHARDC_TEST_DIE_AT_RANK");
        die && *die && std::strtoll(die, nullptr, 10) == rank) {
      std::fprintf(stderr, "shardc: test hook SHARDC_TEST_DIE_AT_RANK: rank %lld exits now\n",
                   static_cast<long long>(rank));
      std::fflush(stderr);
      _exit(9);
    }

    if (forward) {
      device.resetPeak();
      auto forwardStart = std::chrono::steady_clock::now();
      auto views =
          run(mineForward.function, options.dataParallel ? mineForward.inputs : inputs);
      report.forward->seconds = secondsSince(forwardStart);
      measure(device, blocks(), *report.forward);
      for (const TensorView &view : views) {
        HostTensor t{view.name, view.dtype, view.shape, {}};
        t.data.resize(static_cast<size_t>(t.expectedBytes()));
        if (!t.data.empty()) backend.copyToHost(t.data.data(), view.data, t.data.size());
        outputs.push_back(std::move(t));
      }
      state.releaseFunctionBuffers();
      trim();
      if (options.dataParallel)
        outputs = gatherBatchOutputs(plan, comm, globalBatchRows(inputs), outputs);
    }
    if (forward && !options.dataParallel) checkSameOnEveryRank(comm, outputs, "the forward");
    // Training steps 2, 3, ...: on their batches, the peak the first step's.
    for (int step = 2; forward && options.trainingSteps && step <= 1 + options.forwardRepeats;
         ++step) {
      device.resetPeak();
      auto views = run(mineForward.function, batches[(step - 1) % batches.size()]);
      std::vector<HostTensor> stepOutputs;
      for (const TensorView &view : views) {
        HostTensor t{view.name, view.dtype, view.shape, {}};
        t.data.resize(static_cast<size_t>(t.expectedBytes()));
        if (!t.data.empty()) backend.copyToHost(t.data.data(), view.data, t.data.size());
        stepOutputs.push_back(std::move(t));
      }
      if (device.peakBytes() != report.forward->peakBytes)
        throw RuntimeError("training step " + std::to_string(step) + " peaked at " +
                           std::to_string(device.peakBytes()) + " bytes, the first at " +
                           std::to_string(report.forward->peakBytes) +
                           " (every step must hold the same memory)");
      state.releaseFunctionBuffers();
      trim();
      if (options.dataParallel)
        stepOutputs = gatherBatchOutputs(plan, comm, globalBatchRows(inputs), stepOutputs);
      else
        checkSameOnEveryRank(comm, stepOutputs, "training step " + std::to_string(step) + "'s");
      if (rank == 0) result.run.stepOutputs.push_back(std::move(stepOutputs));
    }

    // Outside every measurement window. A checkpoint (--save): every rank
    // pwrites its own rows into one file, as with the local backend (on
    // several machines the path must be on a shared file system). Device
    // memory is staged on the host first (the rank's param bytes).
    if (!options.savePath.empty()) {
      std::map<int32_t, std::vector<std::byte>> staged;
      if (!runtime.hostAddressable)
        for (const auto &[index, buffer] : state.params()) staged[index] = hostCopy(buffer);
      checkpoint::saveCooperatively(
          plan,
          [&](int32_t i) -> const std::byte * {
            if (!runtime.hostAddressable) return staged.at(i).data();
            return state.paramStorage(i)->data();
          },
          comm, options.savePath);
    }
    // --save-params: one parameter at a time, gathered to rank 0.
    if (options.gatherParams)
      for (size_t i = 0; i < plan.params.size(); ++i) {
        const Param &p = plan.params[i];
        const DeviceBuffer *local = state.paramStorage(static_cast<int32_t>(i));
        if (!local) throw RuntimeError("gathering params: init did not allocate '" + p.name + "'");
        std::vector<std::byte> staged;
        const std::byte *bytes = local->data();
        if (!runtime.hostAddressable) {
          staged = hostCopy(*local);
          bytes = staged.data();
        }
        HostTensor full{p.name, p.dtype, p.shape, {}};
        if (p.sharded()) {
          if (rank == 0) full.data.resize(static_cast<size_t>(p.gatheredBytes(n)));
          comm.gather(0, bytes, static_cast<size_t>(p.localBytes()), full.data.data());
          // Padding rows are only at the end, so the full tensor is a prefix.
          if (rank == 0) full.data.resize(static_cast<size_t>(p.fullBytes()));
        } else if (rank == 0) {
          full.data.assign(bytes, bytes + p.fullBytes());
        }
        if (rank == 0) params.push_back(std::move(full));
      }
  } catch (...) {
    state.releaseAll();
    throw;
  }
  state.releaseAll();
  memory.peakRss = peakRssBytes();

  // Every rank's figures to rank 0, which prints the report.
  nlohmann::json mine = {{"rank", rank},
                         {"param_bytes", report.paramBytes},
                         {"init", phaseToJson(report.init)},
                         {"rss_init", memory.peakRssAfterInit},
                         {"rss", memory.peakRss}};
  if (report.forward) mine["forward"] = phaseToJson(*report.forward);
  std::vector<std::string> all = comm.gatherStrings(0, mine.dump());
  result.run.unshardedParamBytes = unshardedParamBytes(plan);
  if (rank == 0) {
    for (const std::string &text : all) {
      nlohmann::json j = nlohmann::json::parse(text);
      RankReport r;
      r.rank = j["rank"];
      r.paramBytes = j["param_bytes"];
      r.init = phaseFromJson(j["init"]);
      if (j.contains("forward")) r.forward = phaseFromJson(j["forward"]);
      result.run.ranks.push_back(std::move(r));
      result.memory.push_back({j["rss_init"].get<int64_t>(), j["rss"].get<int64_t>()});
    }
    result.run.outputs = std::move(outputs);
    result.run.params = std::move(params);
  } else {
    result.run.ranks.push_back(std::move(report));
    result.memory.push_back(memory);
  }
  return result;
}

}  // namespace shardc::runtime::mpi
