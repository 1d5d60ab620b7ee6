// Helpers for the executor tests of the init instructions: hand-built plans
// with one or more params and an init function, and a runner that returns
// each rank's raw local param storage (padding included).
#pragma once

#include "runtime/Executor.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/MemoryModel.h"
#include "runtime/RuntimeError.h"

#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace shardc::test::exec {

using plan::AttrValue;
using plan::Buffer;
using plan::Category;
using plan::DType;
using plan::Function;
using plan::Instruction;
using plan::OpCode;
using plan::Param;
using plan::Plan;

/// A plan with an empty "init"; add params and buffers with the helpers.
inline Plan emptyPlan(int64_t worldSize) {
  Plan plan;
  plan.worldSize = worldSize;
  Function init;
  init.name = "init";
  plan.functions.push_back(init);
  return plan;
}

inline Function &initOf(Plan &plan) { return plan.functions[0]; }

/// Adds a sharded (or, with sharded = false, replicated) param and its init
/// buffer; returns the buffer id.
inline int32_t addParam(Plan &plan, const std::string &name, std::vector<int64_t> shape,
                        DType dtype = DType::F32, bool sharded = true) {
  Param p;
  p.name = name;
  p.dtype = dtype;
  p.shape = std::move(shape);
  p.device = "cpu";
  if (sharded && !p.shape.empty())
    p.chunkRows = (p.shape[0] + plan.worldSize - 1) / plan.worldSize;
  plan.params.push_back(p);
  Function &init = initOf(plan);
  int32_t id = static_cast<int32_t>(init.buffers.size());
  init.buffers.push_back({id, name, dtype, p.localShape(), p.localBytes(), Category::Parameter,
                          static_cast<int32_t>(plan.params.size() - 1)});
  return id;
}

/// Adds a non-param buffer of `bytes` (default: its logical size).
inline int32_t addBuffer(Plan &plan, const std::string &name, std::vector<int64_t> shape,
                         DType dtype = DType::F32, int64_t bytes = -1,
                         Category category = Category::Activation) {
  Function &init = initOf(plan);
  int32_t id = static_cast<int32_t>(init.buffers.size());
  if (bytes < 0) bytes = plan::numElements(shape) * plan::dtypeSize(dtype);
  init.buffers.push_back({id, name, dtype, std::move(shape), bytes, category, std::nullopt});
  return id;
}

inline void emit(Plan &plan, OpCode op, std::vector<int32_t> inputs,
                 std::vector<int32_t> outputs, std::map<std::string, AttrValue> attrs = {},
                 std::string loc = "") {
  Function &init = initOf(plan);
  if (loc.empty()) loc = "init.py:" + std::to_string(init.body.size() + 1);
  init.body.push_back({op, std::move(inputs), std::move(outputs), std::move(attrs),
                       std::move(loc)});
}

/// What one rank ends init with.
struct RankInit {
  std::vector<std::vector<std::byte>> params;  // local storage, padding included
  int64_t peakBytes = 0, endBytes = 0;
  std::vector<runtime::LiveAllocation> liveAtPeak;
  runtime::MemoryPrediction predicted;
};

/// Runs "init" on every rank (threads) and returns each rank's local storage
/// and measured + predicted memory. The first failure is rethrown.
inline std::vector<RankInit> runInit(const Plan &plan, uint64_t seed = 0, int threads = 1) {
  const int64_t n = plan.worldSize;
  std::vector<RankInit> out(n);
  for (int64_t r = 0; r < n; ++r) out[r].predicted = runtime::predictMemory(plan, "init", r);
  runtime::LocalGroup group(n, std::chrono::seconds(20));
  std::mutex mutex;
  std::optional<std::string> failure;
  std::vector<std::thread> threadsList;
  for (int64_t r = 0; r < n; ++r)
    threadsList.emplace_back([&, r] {
      runtime::CpuDevice device;
      runtime::RankState state(r);
      try {
        runtime::LocalCommunicator comm(group, r);
        runtime::ExecutionContext context{seed, threads};
        runtime::executeFunction(plan, "init", device, comm, state, {}, context);
        out[r].peakBytes = device.peakBytes();
        out[r].endBytes = device.currentBytes();
        out[r].liveAtPeak = device.liveAtPeak();
        for (size_t i = 0; i < plan.params.size(); ++i) {
          const runtime::DeviceBuffer *b = state.paramStorage(static_cast<int32_t>(i));
          std::vector<std::byte> bytes;
          if (b) bytes.assign(b->data(), b->data() + b->bytes());
          out[r].params.push_back(std::move(bytes));
        }
      } catch (const std::exception &e) {
        {
          std::lock_guard lock(mutex);
          if (!failure) failure = "rank " + std::to_string(r) + ": " + e.what();
        }
        group.abort(e.what());
      }
      state.releaseAll();
    });
  for (std::thread &t : threadsList) t.join();
  if (failure) throw runtime::RuntimeError(*failure);
  return out;
}

/// The concatenation of every rank's valid rows of param `index`.
inline std::vector<std::byte> concatenated(const Plan &plan, const std::vector<RankInit> &ranks,
                                           size_t index) {
  const Param &p = plan.params[index];
  if (!p.sharded()) return ranks[0].params[index];
  const int64_t rowBytes = p.rowElements() * plan::dtypeSize(p.dtype);
  std::vector<std::byte> full;
  for (int64_t r = 0; r < plan.worldSize; ++r) {
    const auto &local = ranks[r].params[index];
    full.insert(full.end(), local.begin(), local.begin() + p.validRows(r) * rowBytes);
  }
  return full;
}

/// True when every padding byte of every rank's shard of `index` is zero.
inline bool paddingIsZero(const Plan &plan, const std::vector<RankInit> &ranks, size_t index) {
  const Param &p = plan.params[index];
  if (!p.sharded()) return true;
  const int64_t rowBytes = p.rowElements() * plan::dtypeSize(p.dtype);
  for (int64_t r = 0; r < plan.worldSize; ++r) {
    const auto &local = ranks[r].params[index];
    for (size_t i = static_cast<size_t>(p.validRows(r) * rowBytes); i < local.size(); ++i)
      if (local[i] != std::byte{0}) return false;
  }
  return true;
}

template <typename T> std::vector<T> as(const std::vector<std::byte> &bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

}  // namespace shardc::test::exec
