#include "runtime/LocalSession.h"
#include "runtime/DataParallel.h"

#include "runtime/Kernels.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/PlanQueries.h"
#include "runtime/MemoryModel.h"
#include "runtime/PlanCheck.h"
#include "runtime/RankThreads.h"
#include "runtime/RuntimeError.h"

#include <cstring>
#include <map>
#include <optional>

namespace shardc::runtime {
using namespace shardc::plan;

LocalSession::LocalSession(Plan plan, uint64_t seed, std::chrono::duration<double> timeout,
                           const SessionRankFactory &ranks)
    : plan_(std::move(plan)), timeout_(timeout) {
  checkPlan(plan_);
  if (!plan_.function("init")) throw RuntimeError("LocalSession: plan has no 'init' function");
  context_.seed = seed;
  context_.threads = defaultKernelThreads(plan_.worldSize);
  const SessionRankFactory make = ranks ? ranks : cpuSessionRanks(context_.threads);
  for (int64_t r = 0; r < plan_.worldSize; ++r) ranks_.push_back(make(r));
}

std::vector<TensorView> LocalSession::run(const Plan &plan, const std::string &function,
                                          SessionRank &rank, Communicator &comm,
                                          RankState &state,
                                          const std::vector<HostTensor> &inputs) {
  return runFunction(plan, function, rank.backend(), comm, state, inputs, context_.seed,
                     "executeFunction");
}

LocalSession::~LocalSession() = default;

void LocalSession::onEveryRank(const std::function<void(SessionRank &, Communicator &)> &body,
                               CollectiveMemory memory) {
  const int64_t n = worldSize();
  LocalGroup group(n, timeout_);
  runRankThreads(group, n, [&](int64_t r) {
    SessionRank &rank = *ranks_[r];
    rank.enterThread();
    const std::unique_ptr<Communicator> comm =
        memory == CollectiveMemory::Host
            ? std::make_unique<LocalCommunicator>(group, r)
            : rank.communicator(group, r);
    body(rank, *comm);
  });
}

bool LocalSession::materialized() const {
  for (const auto &rank : ranks_)
    for (size_t i = 0; i < plan_.params.size(); ++i)
      if (!rank->state().paramStorage(static_cast<int32_t>(i))) return false;
  return true;
}

void LocalSession::release() {
  for (const auto &rank : ranks_) {
    rank->state().releaseAll();
    rank->trimReuseCache();
  }
}

std::vector<PhaseReport> LocalSession::init() {
  const int64_t n = worldSize();
  std::vector<PhaseReport> reports(n);
  // Predictions first: an inconsistent plan fails before anything changes.
  for (int64_t r = 0; r < n; ++r) predict(predictMemory(plan_, "init", r), reports[r]);
  // As in replaceParams: the old shards' blocks are kept for the new ones.
  for (const auto &rank : ranks_) rank->state().releaseAll();
  try {
    onEveryRank([&](SessionRank &rank, Communicator &comm) {
      PhaseReport &report = reports[rank.state().rank()];
      rank.device().resetPeak();
      auto start = std::chrono::steady_clock::now();
      run(plan_, "init", rank, comm, rank.state(), {});
      report.seconds = secondsSince(start);
      measure(rank.device(), rank.blockStats(), report);
      rank.state().releaseFunctionBuffers();  // init's leftovers; params persist
      rank.trimReuseCache();
    });
  } catch (...) {
    release();
    throw;
  }
  return reports;
}

std::vector<HostTensor> LocalSession::forward(const std::vector<HostTensor> &inputs,
                                              std::vector<PhaseReport> &reports) {
  const Function *function = plan_.function("forward");
  if (!function) throw RuntimeError("forward: the plan has no 'forward' function");
  if (!materialized())
    throw RuntimeError("forward: the parameters are not materialized (run init first)");
  const std::vector<HostTensor> ordered = dataParallel_ ? matchGlobalInputs(plan_, inputs)
                                                        : matchForwardInputs(*function, inputs);
  const int64_t n = worldSize();
  // Each rank's function and inputs: its own micro-batch when data-parallel.
  std::vector<RankForward> rankForwards(n, RankForward{"forward", {}, {}});
  if (dataParallel_)
    for (int64_t r = 0; r < n; ++r) rankForwards[r] = rankForward(plan_, ordered, r);
  std::vector<PhaseReport> measured(n);
  for (int64_t r = 0; r < n; ++r)
    predict(predictMemory(plan_, rankForwards[r].function, r, ranks_[r]->device().live()),
            measured[r]);
  std::vector<std::vector<HostTensor>> outputs(n);
  onEveryRank([&](SessionRank &rank, Communicator &comm) {
    const int64_t r = rank.state().rank();
    rank.device().resetPeak();
    const HostMemory::Stats blocksBefore = rank.blockStats();
    auto start = std::chrono::steady_clock::now();
    try {
      std::vector<TensorView> views =
          run(plan_, rankForwards[r].function, rank, comm, rank.state(),
              dataParallel_ ? rankForwards[r].inputs : ordered);
      measured[r].seconds = secondsSince(start);
      measure(rank.device(), rank.blockStats(), measured[r], blocksBefore);
      for (const TensorView &view : views) outputs[r].push_back(rank.toHost(view));
    } catch (...) {
      rank.state().releaseFunctionBuffers();
      rank.trimReuseCache();
      throw;
    }
    // Params are untouched. The blocks forward released stay for the next
    // forward (a loop's steady state: no first touch, bench/README.md "Warm
    // forwards"), within HostMemory's bound; release() and init trim them.
    rank.state().releaseFunctionBuffers();
  });
  if (dataParallel_) {
    reports = std::move(measured);
    return concatRankOutputs(outputs, replicatedOutputs(*plan_.function("forward")));
  }
  for (int64_t r = 1; r < n; ++r)
    for (size_t i = 0; i < outputs[0].size(); ++i)
      if (outputs[r][i].data != outputs[0][i].data)
        throw RuntimeError("output '" + outputs[0][i].name +
                           "' differs between rank 0 and rank " + std::to_string(r) +
                           " (ranks must compute identical outputs)");
  reports = std::move(measured);
  return std::move(outputs[0]);
}

std::vector<PhaseReport> LocalSession::replaceParams(const Plan &source) {
  checkPlan(source);
  if (source.worldSize != plan_.worldSize)
    throw RuntimeError("replacing params: the source plan is for world size " +
                       std::to_string(source.worldSize) + ", the session's for " +
                       std::to_string(plan_.worldSize));
  if (!source.function("init"))
    throw RuntimeError("replacing params: the source plan has no 'init' function");
  std::map<std::string, int32_t> indexOf;
  for (size_t i = 0; i < plan_.params.size(); ++i)
    indexOf[plan_.params[i].name] = static_cast<int32_t>(i);
  std::vector<int32_t> target(source.params.size());
  std::vector<bool> covered(plan_.params.size(), false);
  for (size_t j = 0; j < source.params.size(); ++j) {
    const Param &b = source.params[j];
    auto it = indexOf.find(b.name);
    if (it == indexOf.end())
      throw RuntimeError("replacing params: '" + b.name + "' is not a parameter of the model");
    const Param &a = plan_.params[it->second];
    if (covered[it->second])
      throw RuntimeError("replacing params: '" + b.name + "' appears twice in the source");
    if (a.shape != b.shape || a.localShape() != b.localShape() || a.dtype != b.dtype ||
        a.sharded() != b.sharded() || a.isBuffer != b.isBuffer)
      throw RuntimeError("replacing params: '" + b.name + "' is stored as " +
                         dtypeName(b.dtype) + " " + shapeToString(b.localShape()) +
                         " by the source and as " + dtypeName(a.dtype) + " " +
                         shapeToString(a.localShape()) + " by the model");
    covered[it->second] = true;
    target[j] = it->second;
  }
  bool coversAll = true;
  for (bool c : covered) coversAll = coversAll && c;
  if (!coversAll && !materialized())
    throw RuntimeError("replacing params: the model's parameters are not materialized and "
                       "the source replaces only " + std::to_string(source.params.size()) +
                       " of " + std::to_string(plan_.params.size()));
  const int64_t n = worldSize();
  // Predictions first: an inconsistent plan fails before anything changes.
  for (int64_t r = 0; r < n; ++r) (void)predictMemory(source, "init", r);

  // Nothing can fail before this point; from here on a failure loses values.
  // The released shards' blocks stay with the device (no trim here): the
  // source's init reuses them, so a load into a model that holds its shards
  // writes into resident memory instead of faulting in and clearing fresh
  // pages (the kernel's page clearing was half of a load's time). Resident
  // bytes stay within max(what was held, this phase's accounted peak).
  for (const auto &rank : ranks_)
    for (size_t i = 0; i < covered.size(); ++i)
      if (covered[i]) rank->state().takeParam(static_cast<int32_t>(i)).release();
  std::vector<PhaseReport> reports(n);
  for (int64_t r = 0; r < n; ++r)
    predict(predictMemory(source, "init", r, ranks_[r]->device().live()), reports[r]);
  try {
    onEveryRank([&](SessionRank &rank, Communicator &comm) {
      PhaseReport &report = reports[rank.state().rank()];
      RankState scratch(rank.state().rank());  // destroyed before the device
      rank.device().resetPeak();
      auto start = std::chrono::steady_clock::now();
      run(source, "init", rank, comm, scratch, {});
      report.seconds = secondsSince(start);
      measure(rank.device(), rank.blockStats(), report);
      scratch.releaseFunctionBuffers();
      for (size_t j = 0; j < source.params.size(); ++j) {
        DeviceBuffer buffer = scratch.takeParam(static_cast<int32_t>(j));
        if (!buffer)
          throw RuntimeError("replacing params: the source's init did not allocate '" +
                             source.params[j].name + "'");
        if (!rank.state().adoptParam(target[j], buffer))
          throw RuntimeError("replacing params: '" + source.params[j].name +
                             "' still has storage");
      }
      rank.trimReuseCache();
    });
  } catch (...) {
    release();
    throw;
  }
  return reports;
}

void LocalSession::save(const std::string &path) {
  if (!materialized())
    throw RuntimeError("writing '" + path + "': the parameters are not materialized");
  // The writer's collectives agree on host values (name lengths, pids),
  // which a GPU rank's device-to-device communicator cannot move.
  onEveryRank([&](SessionRank &rank, Communicator &comm) { rank.saveRows(plan_, comm, path); },
              CollectiveMemory::Host);
}

void LocalSession::saveOptimizerState(const std::string &path) {
  if (!materialized())
    throw RuntimeError("writing '" + path + "': the parameters are not materialized");
  const plan::Plan view = optimizerStateView(plan_);
  onEveryRank([&](SessionRank &rank, Communicator &comm) { rank.saveRows(view, comm, path); },
              CollectiveMemory::Host);
}

std::optional<HostTensor> LocalSession::localParam(int32_t index, int64_t rank) const {
  if (index < 0 || index >= static_cast<int32_t>(plan_.params.size()) || rank < 0 ||
      rank >= worldSize())
    throw RuntimeError("localParam: param " + std::to_string(index) + " or rank " +
                       std::to_string(rank) + " out of range");
  SessionRank &holder = *ranks_[rank];
  const DeviceBuffer *local = holder.state().paramStorage(index);
  if (!local) return std::nullopt;
  const Param &p = plan_.params[index];
  HostTensor t{p.name, p.dtype, p.localShape(), {}};
  t.data.resize(static_cast<size_t>(p.localBytes()));
  if (!t.data.empty()) {
    holder.enterThread();
    holder.copyToHost(t.data.data(), local->data(), t.data.size());
  }
  return t;
}

int64_t LocalSession::paramBytes(int64_t rank) const {
  if (rank < 0 || rank >= worldSize())
    throw RuntimeError("paramBytes: rank " + std::to_string(rank) + " out of range");
  return ranks_[rank]->device().currentBytes(Category::Parameter);
}

}  // namespace shardc::runtime
