#include "runtime/DataParallel.h"

#include "runtime/InitOps.h"
#include "runtime/Kernels.h"
#include "runtime/LocalRun.h"
#include "runtime/RuntimeError.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace shardc::runtime {
using namespace shardc::plan;

BatchSlice batchSlice(int64_t batch, int64_t worldSize, int64_t rank) {
  const int64_t base = batch / worldSize, extra = batch % worldSize;
  return {rank * base + std::min(rank, extra), base + (rank < extra ? 1 : 0)};
}

std::vector<int64_t> microBatchSizes(int64_t batch, int64_t worldSize) {
  std::vector<int64_t> sizes{batchSlice(batch, worldSize, 0).rows};
  const int64_t last = batchSlice(batch, worldSize, worldSize - 1).rows;
  if (last != sizes[0]) sizes.push_back(last);
  return sizes;
}

std::string forwardFunctionName(int64_t rows, int64_t firstRows) {
  return rows == firstRows ? "forward" : "forward.rows" + std::to_string(rows);
}

namespace {

/// A fresh activation buffer of `like`'s dtype and shape in `f`.
int32_t freshBuffer(Function &f, const plan::Buffer &like, const std::string &name) {
  plan::Buffer buffer(static_cast<int32_t>(f.buffers.size()), name, like.dtype, like.shape,
                      plan::numElements(like.shape) * plan::dtypeSize(like.dtype),
                      plan::Category::Activation);
  f.buffers.push_back(buffer);
  return buffer.id;
}

/// `sum` (an all_reduce_sum of the forward) joined with zeros: this rank's
/// part of the sum is none, and the other ranks' collective completes.
void joinSumWithZeros(Function &f, const Instruction &sum) {
  const plan::Buffer &in = f.buffers.at(static_cast<size_t>(sum.inputs.at(0)));
  const plan::Buffer &out = f.buffers.at(static_cast<size_t>(sum.outputs.at(0)));
  const std::string inName = in.name, outName = out.name;
  const plan::Buffer inLike = in, outLike = out;
  const int32_t zeros = freshBuffer(f, inLike, inName + ".no_rows");
  const int32_t result = freshBuffer(f, outLike, outName + ".no_rows");
  Instruction joined = sum;
  joined.inputs = {zeros};
  joined.outputs = {result};
  f.body.push_back({plan::OpCode::Alloc, {}, {zeros}, {}, sum.loc});
  f.body.push_back({plan::OpCode::Fill, {}, {zeros}, {{"value", 0.0}}, sum.loc});
  f.body.push_back({plan::OpCode::Alloc, {}, {result}, {}, sum.loc});
  f.body.push_back(std::move(joined));
  f.body.push_back({plan::OpCode::Free, {zeros}, {}, {}, sum.loc});
  f.body.push_back({plan::OpCode::Free, {result}, {}, {}, sum.loc});
}

}  // namespace

Function collectivesOnly(const Function &forward, const std::string &name) {
  Function result;
  result.name = name;
  result.buffers = forward.buffers;  // ids stay valid; unused ones cost nothing
  std::set<int32_t> gathered;        // buffers an all_gather fills
  for (const Instruction &inst : forward.body)
    if (inst.op == plan::OpCode::AllGather) gathered.insert(inst.outputs.begin(), inst.outputs.end());
  // The collectives in the forward's order, so that every rank's sequence
  // matches.
  for (const Instruction &inst : forward.body) {
    if (inst.op == plan::OpCode::AllReduceSum) {
      joinSumWithZeros(result, inst);
      continue;
    }
    bool keep = inst.op == plan::OpCode::AllGather;
    if (inst.op == plan::OpCode::Alloc && inst.outputs.size() == 1) keep = gathered.count(inst.outputs[0]);
    if (inst.op == plan::OpCode::Free && inst.inputs.size() == 1) keep = gathered.count(inst.inputs[0]);
    if (keep) result.body.push_back(inst);
  }
  return result;
}

int64_t globalBatchRows(const std::vector<HostTensor> &inputs) {
  int64_t rows = -1;
  std::string first;
  for (const HostTensor &t : inputs) {
    if (t.shape.empty()) continue;  // every rank reads it whole
    if (rows < 0) {
      rows = t.shape[0];
      first = t.name;
    } else if (t.shape[0] != rows) {
      throw RuntimeError("data-parallel: input '" + t.name + "' has " +
                         std::to_string(t.shape[0]) + " rows in dim 0 but '" + first + "' has " +
                         std::to_string(rows) + " (every input is the same global batch)");
    }
  }
  if (rows < 1)
    throw RuntimeError(
        "data-parallel: the forward has no batch input with rows (0-d inputs are read whole)");
  return rows;
}

std::vector<HostTensor> matchGlobalInputs(const Plan &plan, const std::vector<HostTensor> &given) {
  const Function *forward = plan.function("forward");
  if (!forward) throw RuntimeError("data-parallel: the plan has no 'forward' function");
  std::vector<HostTensor> ordered = matchForwardInputs(*forward, given, /*anyBatchRows=*/true);
  globalBatchRows(ordered);
  return ordered;
}

HostTensor sliceRows(const HostTensor &tensor, int64_t begin, int64_t rows) {
  HostTensor slice{tensor.name, tensor.dtype, tensor.shape, {}};
  slice.shape[0] = rows;
  const size_t rowBytes = static_cast<size_t>(slice.expectedBytes() / std::max<int64_t>(rows, 1));
  slice.data.resize(static_cast<size_t>(slice.expectedBytes()));
  if (rows > 0)
    std::memcpy(slice.data.data(), tensor.data.data() + static_cast<size_t>(begin) * rowBytes,
                slice.data.size());
  return slice;
}

HostTensor moveBatchDim(const HostTensor &tensor, int64_t dim, bool toFront) {
  // Row-major [outer, D, inner] <-> [D, outer, inner]: blocks of `inner`
  // elements change places.
  const std::vector<int64_t> &from = tensor.shape;
  std::vector<int64_t> to = from;
  if (toFront) {
    to.erase(to.begin() + dim);
    to.insert(to.begin(), from[dim]);
  } else {
    to.erase(to.begin());
    to.insert(to.begin() + dim, from[0]);
  }
  const std::vector<int64_t> &outerFirst = toFront ? from : to;  // the [outer, D, inner] one
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= outerFirst[d];
  for (size_t d = static_cast<size_t>(dim) + 1; d < outerFirst.size(); ++d)
    inner *= outerFirst[d];
  const int64_t size = outerFirst[dim];
  HostTensor moved{tensor.name, tensor.dtype, to, {}};
  moved.data.resize(tensor.data.size());
  const size_t block = static_cast<size_t>(inner * plan::dtypeSize(tensor.dtype));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t d = 0; d < size; ++d) {
      const size_t outerFirstAt = static_cast<size_t>(o * size + d) * block;
      const size_t dimFirstAt = static_cast<size_t>(d * outer + o) * block;
      std::memcpy(moved.data.data() + (toFront ? dimFirstAt : outerFirstAt),
                  tensor.data.data() + (toFront ? outerFirstAt : dimFirstAt), block);
    }
  return moved;
}

void restoreBatchDims(std::vector<HostTensor> &outputs,
                      const std::map<std::string, int64_t> &dims) {
  for (HostTensor &output : outputs)
    if (auto dim = dims.find(output.name); dim != dims.end())
      output = moveBatchDim(output, dim->second, false);
}

RankForward rankForward(const Plan &plan, const std::vector<HostTensor> &globalInputs,
                        int64_t rank) {
  const int64_t batch = globalBatchRows(globalInputs);
  RankForward result;
  result.slice = batchSlice(batch, plan.worldSize, rank);
  const int64_t firstRows = batchSlice(batch, plan.worldSize, 0).rows;
  result.function = forwardFunctionName(result.slice.rows, firstRows);
  const Function *function = plan.function(result.function);
  const Function *forward = plan.function("forward");
  // The forward's rows: those of its first input that is not 0-d.
  int64_t forwardRows = -1;
  if (forward)
    for (int32_t id : forward->inputs)
      if (const plan::Buffer &b = forward->buffers.at(static_cast<size_t>(id)); !b.shape.empty()) {
        forwardRows = b.shape[0];
        break;
      }
  const bool fits = function && forwardRows == firstRows;
  if (!fits)
    throw RuntimeError("data-parallel: the plan was not compiled for a global batch of " +
                       std::to_string(batch) + " rows over " + std::to_string(plan.worldSize) +
                       " ranks (rank " + std::to_string(rank) + " needs '" + result.function +
                       "' for " + std::to_string(result.slice.rows) +
                       " rows); compile it with that batch");
  if (result.slice.rows > 0)
    for (const HostTensor &t : globalInputs)
      result.inputs.push_back(t.shape.empty()
                                  ? t  // 0-d: every rank's whole
                                  : sliceRows(t, result.slice.begin, result.slice.rows));
  return result;
}

HostTensor sumRankShares(const std::vector<const HostTensor *> &shares) {
  const HostTensor &first = *shares.at(0);
  if (first.dtype == plan::DType::I64)
    throw RuntimeError("data-parallel: output '" + first.name +
                       "' is 0-d int64; only floating shares of a sum add up over ranks");
  long double sum = 0;
  for (size_t r = 0; r < shares.size(); ++r) {
    const HostTensor &part = *shares[r];
    if (part.dtype != first.dtype || !part.shape.empty() ||
        part.data.size() != static_cast<size_t>(plan::dtypeSize(first.dtype)))
      throw RuntimeError("data-parallel: output '" + first.name + "' of rank " + std::to_string(r) +
                         " is " + plan::dtypeName(part.dtype) + " " + shapeToString(part.shape) +
                         ", not a 0-d " + plan::dtypeName(first.dtype) + " share");
    sum += static_cast<long double>(loadAsDouble(part.dtype, part.data.data(), 0));
  }
  HostTensor result = first;
  storeFromDouble(result.dtype, result.data.data(), 0, static_cast<double>(sum));
  return result;
}

std::vector<bool> replicatedOutputs(const plan::Function &f) {
  std::vector<bool> flags;
  for (int32_t id : f.outputs) flags.push_back(f.buffers.at(static_cast<size_t>(id)).replicated);
  return flags;
}

std::vector<HostTensor> concatRankOutputs(const std::vector<std::vector<HostTensor>> &perRank,
                                          const std::vector<bool> &replicated) {
  std::vector<HostTensor> result = perRank.at(0);
  auto isReplicated = [&](size_t i) { return i < replicated.size() && replicated[i]; };
  for (size_t i = 0; i < result.size(); ++i) {
    if (!result[i].shape.empty() || isReplicated(i)) continue;
    std::vector<const HostTensor *> shares;
    for (const std::vector<HostTensor> &outputs : perRank)
      if (!outputs.empty()) shares.push_back(&outputs.at(i));  // ranks with rows
    result[i] = sumRankShares(shares);
  }
  // One allocation per output (the global outputs can be hundreds of MB).
  for (size_t i = 0; i < result.size(); ++i) {
    size_t total = 0;
    for (const std::vector<HostTensor> &outputs : perRank)
      if (i < outputs.size()) total += outputs[i].data.size();
    result[i].data.reserve(total);
  }
  for (size_t r = 1; r < perRank.size(); ++r) {
    if (perRank[r].empty()) continue;  // a rank with no rows
    if (perRank[r].size() != result.size())
      throw RuntimeError("data-parallel: rank " + std::to_string(r) + " returned " +
                         std::to_string(perRank[r].size()) + " outputs, rank 0 " +
                         std::to_string(result.size()));
    for (size_t i = 0; i < result.size(); ++i) {
      HostTensor &out = result[i];
      const HostTensor &part = perRank[r][i];
      if (out.shape.empty() || isReplicated(i)) continue;  // summed, or rank 0's
      if (part.dtype != out.dtype || part.shape.size() != out.shape.size() ||
          !std::equal(out.shape.begin() + 1, out.shape.end(), part.shape.begin() + 1))
        throw RuntimeError("data-parallel: output '" + out.name + "' of rank " +
                           std::to_string(r) + " is " + shapeToString(part.shape) +
                           ", which does not stack under rank 0's " + shapeToString(out.shape));
      out.shape[0] += part.shape[0];
      out.data.insert(out.data.end(), part.data.begin(), part.data.end());
    }
  }
  return result;
}

std::vector<HostTensor> makeGlobalInputs(const Plan &plan, int64_t globalRows, uint64_t seed,
                                         const std::map<std::string, int64_t> &intBounds) {
  // A plan holding only forward's inputs, reshaped to the global batch.
  Plan shapes;
  shapes.worldSize = plan.worldSize;
  Function inputsOnly;
  inputsOnly.name = "forward";
  if (const Function *forward = plan.function("forward"))
    for (int32_t id : forward->inputs) {
      Buffer b = forward->buffers[id];
      if (!b.shape.empty()) b.shape[0] = globalRows;  // a 0-d input is every rank's whole
      b.id = static_cast<int32_t>(inputsOnly.buffers.size());
      b.bytes = numElements(b.shape) * dtypeSize(b.dtype);
      inputsOnly.inputs.push_back(b.id);
      inputsOnly.buffers.push_back(std::move(b));
    }
  shapes.functions.push_back(std::move(inputsOnly));
  return makeDeterministicInputs(shapes, seed, intBounds);
}

}  // namespace shardc::runtime
