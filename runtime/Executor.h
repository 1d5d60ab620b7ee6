// Executes one Function of a Plan on one rank: the executor core, shared by
// every backend.
//
// The core decodes and validates each instruction against the op table
// (runtime/OpTable.def), owns the function's buffers, frees and aliases,
// allocates through the Device (whose MemoryLedger is the one MemoryModel
// replays), and calls the Backend (runtime/Backend.h) for kernels and
// copies, and the Communicator for collectives. Memory behaviour is exactly
// the one MemoryModel.h predicts (see the rules there); every error names
// the function, instruction index, op and loc.
#pragma once

#include "runtime/Backend.h"
#include "runtime/Communicator.h"
#include "runtime/Device.h"
#include "runtime/OpProfile.h"
#include "runtime/HostTensor.h"
#include "runtime/Plan.h"

#include <map>
#include <string>
#include <vector>

namespace shardc::runtime {

/// A read-only look at a tensor that lives on a device, owned elsewhere.
struct TensorView {
  std::string name;
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> shape;
  const std::byte *data = nullptr;

  int64_t logicalBytes() const { return plan::numElements(shape) * plan::dtypeSize(dtype); }
  HostTensor toHost() const;
};

/// What one rank keeps between functions: the persistent param storage
/// (created by init's `alloc`s, used by later functions without `alloc`) and
/// the buffers the last function left allocated (its outputs, inputs and
/// anything it did not free), until the caller releases them.
/// Must be destroyed (or released) before the Device it allocated from.
class RankState {
public:
  explicit RankState(int64_t rank) : rank_(rank) {}
  int64_t rank() const { return rank_; }

  /// Local storage of param `index`, or nullptr when not allocated yet.
  const DeviceBuffer *paramStorage(int32_t index) const;
  const std::map<int32_t, DeviceBuffer> &params() const { return params_; }

  /// Moves param `index`'s storage out of this state (an empty buffer when
  /// none is allocated); LocalSession moves storage between states with it.
  DeviceBuffer takeParam(int32_t index) {
    auto it = params_.find(index);
    if (it == params_.end()) return {};
    DeviceBuffer buffer = std::move(it->second);
    params_.erase(it);
    return buffer;
  }
  /// Installs `buffer` as param `index`'s storage; false (and `buffer`
  /// untouched) when the param already has storage.
  bool adoptParam(int32_t index, DeviceBuffer &buffer) {
    if (params_.count(index)) return false;
    params_.emplace(index, std::move(buffer));
    return true;
  }

  /// When set, the functions run on this rank add each instruction's wall
  /// time to it (OpProfile.h); null (the default) times nothing.
  OpProfile *profile = nullptr;

  /// Releases what the last function left allocated; invalidates its views.
  void releaseFunctionBuffers() { retained_.clear(); }
  void releaseAll() {
    retained_.clear();
    params_.clear();
  }

private:
  friend class FunctionRun;
  int64_t rank_;
  std::map<int32_t, DeviceBuffer> params_;
  std::vector<DeviceBuffer> retained_;
};

/// Per-run settings every rank gets.
struct ExecutionContext {
  /// The run's seed: the Philox key of `generate` and `orthogonal`
  /// (docs/rng.md); values depend on it, never on the world size.
  uint64_t seed = 0;
  /// Threads a kernel may use on this rank (>= 1).
  int threads = 1;
};

/// max(1, std::thread::hardware_concurrency() / worldSize): the cores a rank
/// may use when all ranks are threads of one process.
int defaultKernelThreads(int64_t worldSize);

/// The core: runs `function` on `state.rank()` with `backend`'s kernels;
/// `entry` names the caller in errors ("executeFunction"). Views point into
/// the backend's device memory. The rest as executeFunction.
std::vector<TensorView> runFunction(const plan::Plan &plan, const std::string &function,
                                    Backend &backend, Communicator &comm, RankState &state,
                                    const std::vector<HostTensor> &inputs, uint64_t seed,
                                    const char *entry);

/// Runs `function` on `state.rank()` on the CPU backend. Instructions carrying a `rank`
/// attribute other than state.rank() are skipped (docs/plan.md). `inputs[i]` is copied into an io
/// buffer for function.inputs[i] (dtype and shape must match) before the
/// first instruction. Returns views of the function's outputs, valid until
/// state.releaseFunctionBuffers(). comm.rank() must equal state.rank() and
/// comm.worldSize() the plan's world size.
std::vector<TensorView> executeFunction(const plan::Plan &plan, const std::string &function,
                                        CpuDevice &device, Communicator &comm,
                                        RankState &state,
                                        const std::vector<HostTensor> &inputs,
                                        const ExecutionContext &context = {});

}  // namespace shardc::runtime
