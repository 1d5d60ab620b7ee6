// A stateful `local` backend: the ranks of one Plan as threads of this
// process, whose devices and parameter storage persist between calls (the
// embedded API's CompiledModel, docs/jit.md). runLocal (LocalRun.h) is the
// one-shot form the CLI uses: init, forward, done. Where the ranks' storage
// lives and which kernels run is the SessionRankFactory's business
// (runtime/SessionRank.h): the CPU by default, or ranks sharing one GPU.
//
// Each call runs one piece of work on every rank, one thread per rank, with
// a fresh LocalGroup (a failed call leaves no aborted group behind); the
// first rank failure aborts the others' collectives and is rethrown as
// RuntimeError("rank R: ...") once every thread has joined. Between calls
// each rank holds only its parameter storage: every function's leftovers are
// released and the device's reuse cache trimmed after the function.
//
// Not thread-safe: one call at a time.
#pragma once

#include "runtime/Device.h"
#include "runtime/Executor.h"
#include "runtime/HostTensor.h"
#include "runtime/LocalRun.h"
#include "runtime/Plan.h"
#include "runtime/SessionRank.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardc::runtime {

class LocalSession {
public:
  /// No memory is allocated until init() or replaceParams(). `ranks` makes
  /// each rank's device and backend; empty: the CPU, with
  /// defaultKernelThreads(N) kernel threads per rank.
  LocalSession(plan::Plan plan, uint64_t seed,
               std::chrono::duration<double> timeout = std::chrono::seconds(60),
               const SessionRankFactory &ranks = {});
  /// Releases every rank's storage before its device.
  ~LocalSession();
  LocalSession(const LocalSession &) = delete;
  LocalSession &operator=(const LocalSession &) = delete;

  const plan::Plan &plan() const { return plan_; }
  int64_t worldSize() const { return plan_.worldSize; }

  /// True when every rank holds storage for every param.
  bool materialized() const;

  /// Releases every rank's param storage, then runs the plan's "init" on
  /// every rank. Returns each rank's report (measured beside predicted).
  /// On failure every rank's storage is released (materialized() false).
  std::vector<PhaseReport> init();

  /// Data-parallel forward (runtime/DataParallel.h; the plan from
  /// compiler::compileDataParallel): forward's inputs are the global batch,
  /// each rank runs its slice, the outputs are concatenated in rank order.
  void setDataParallel(bool on) { dataParallel_ = on; }

  /// Runs the plan's "forward" on every rank with `inputs` (matched by name,
  /// as runLocal does) on the storage held now; params are not touched.
  /// Requires materialized(). Fails when ranks' outputs are not
  /// byte-identical. `reports` receives each rank's measurement.
  std::vector<HostTensor> forward(const std::vector<HostTensor> &inputs,
                                  std::vector<PhaseReport> &reports);

  /// Replaces the storage of every param of the session's plan that
  /// `source` also has (same name, local shape, dtype and sharding, checked
  /// before anything changes) by what `source`'s "init" produces: on every
  /// rank the replaced params' storage is released first, then `source`'s
  /// init runs into a scratch state on the same device and its params are
  /// moved in. Other params keep their storage, which must exist unless
  /// `source` covers every param. Per-rank peak: the params held + what
  /// source's init allocates (its params and its io buffer); predicted =
  /// held + source's predicted peak. On failure every rank's storage is
  /// released (materialized() false): the old values are gone.
  std::vector<PhaseReport> replaceParams(const plan::Plan &source);

  /// Every rank writes its own rows of every param into one safetensors
  /// file (checkpoint::saveCooperatively: nothing gathered, the file appears
  /// only when every rank succeeded). Ranks whose storage is not host
  /// memory (a GPU's) copy their params to the host first: host bytes =
  /// the rank's param bytes while it writes; CPU ranks allocate nothing.
  void save(const std::string &path);
  /// The same for the optimizer state alone (runtime::optimizerStateView).
  void saveOptimizerState(const std::string &path);

  /// A host copy of param `index`'s local storage on `rank` (local shape,
  /// padding rows included), or nullopt when not allocated.
  std::optional<HostTensor> localParam(int32_t index, int64_t rank) const;

  /// Param bytes `rank` holds now.
  int64_t paramBytes(int64_t rank) const;

  /// Releases every rank's param storage.
  void release();

private:
  /// Which memory a call's collectives move: the ranks' own (device
  /// memory: the rank's communicator) or host memory (a save's bookkeeping:
  /// the local backend's memcpy communicator on the same group).
  enum class CollectiveMemory { Device, Host };
  /// Runs body(rank) on every rank, one thread each; see the file comment.
  void onEveryRank(const std::function<void(SessionRank &, Communicator &)> &body,
                   CollectiveMemory memory = CollectiveMemory::Device);
  /// Runs `function` on `rank` with its backend.
  std::vector<TensorView> run(const plan::Plan &plan, const std::string &function,
                              SessionRank &rank, Communicator &comm, RankState &state,
                              const std::vector<HostTensor> &inputs);

  plan::Plan plan_;
  ExecutionContext context_;
  std::chrono::duration<double> timeout_;
  std::vector<std::unique_ptr<SessionRank>> ranks_;
  bool dataParallel_ = false;
};

}  // namespace shardc::runtime
