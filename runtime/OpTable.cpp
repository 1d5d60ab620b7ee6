#include "runtime/OpTable.h"

#include "runtime/InitOps.h"
#include "runtime/init/NormOf.h"
#include "runtime/OpFamilies.h"
#include "runtime/Optimizers.h"
#include "runtime/Plan.h"

#include <array>
#include <limits>

namespace shardc::plan {
namespace {

// ---- workspace rules (the `workspace` column) ------------------------------

Workspace orthogonalWorkspace(const Buffer &output, std::span<const Buffer *const>, int64_t) {
  // A param output is rejected by the executor before any allocation.
  if (output.param) return {};
  return {runtime::orthogonalWorkBytes(output.shape, output.dtype), output.name + ".qr"};
}

Workspace normOfWorkspace(const Buffer &output, std::span<const Buffer *const>, int64_t) {
  // A double sum per element this rank stores, and one block of the
  // regenerated source (runtime/init/NormOf.h).
  return {runtime::init::normOfWorkBytes(numElements(output.shape)), output.name + ".norm"};
}

Workspace moeExpertsWorkspace(const Buffer &output, std::span<const Buffer *const> inputs,
                              int64_t) {
  // The executor checks the operands (the family's rule) before it allocates;
  // a plan the rule rejects predicts no workspace.
  if (inputs.size() != 5 || inputs[3]->shape.size() != 3 || inputs[1]->shape.size() != 2 ||
      output.shape.size() != 2)
    return {};
  return {runtime::moeExpertsWorkBytes(output.shape[0], inputs[1]->shape[1], output.shape[1],
                                       inputs[3]->shape[1] / 2, output.dtype),
          output.name + ".experts"};
}

Workspace moeExpertsHiddenWorkspace(const Buffer &output, std::span<const Buffer *const> inputs,
                                    int64_t) {
  if (inputs.size() != 3 || inputs[0]->shape.size() != 2 || output.shape.size() != 3) return {};
  return {runtime::moeExpertsHiddenWorkBytes(output.shape[0], output.shape[1], inputs[0]->shape[1],
                                             output.shape[2] / 2),
          output.name + ".experts"};
}

Workspace moeExpertsGatedGradWorkspace(const Buffer &output, std::span<const Buffer *const> inputs,
                                       int64_t) {
  // grad [T, H], index [T, k], down [E, H, I] -> [T, k, I]
  if (inputs.size() != 3 || inputs[0]->shape.size() != 2 || output.shape.size() != 3) return {};
  return {runtime::moeExpertsGatedGradWorkBytes(output.shape[0], output.shape[1],
                                                inputs[0]->shape[1], output.shape[2]),
          output.name + ".experts"};
}

Workspace moeExpertsBackwardWorkspace(const Buffer &output, std::span<const Buffer *const> inputs,
                                      int64_t) {
  if (inputs.size() < 6 || inputs[0]->shape.size() != 2 || inputs[1]->shape.size() != 2 ||
      inputs[3]->shape.size() != 3)
    return {};
  // A workspace rule sees no attributes: `wrt` is the operand whose shape
  // the result has. x [T, H] and weights [T, k] agree when H == k; x's
  // rule then holds either (weights needs no accumulator).
  using runtime::MoeOperand;
  MoeOperand wrt = MoeOperand::X;
  if (output.shape == inputs[3]->shape)
    wrt = MoeOperand::GateUp;
  else if (output.shape == inputs[4]->shape)
    wrt = MoeOperand::Down;
  else if (output.shape != inputs[0]->shape)
    wrt = MoeOperand::Weights;
  const std::vector<int64_t> &x = inputs[0]->shape;
  return {runtime::moeExpertsBackwardWorkBytes(wrt, x[0], inputs[1]->shape[1], x[1],
                                               inputs[3]->shape[1] / 2, output.dtype),
          output.name + ".experts"};
}

Workspace linearCrossEntropyWorkspace(const Buffer &output, std::span<const Buffer *const> inputs,
                                      int64_t) {
  // x [N, H], target [N], weight [V, H] (, scale): the executor checks them
  // (the family's rule) before it allocates.
  if (inputs.size() < 3 || inputs[0]->shape.size() != 2 || inputs[2]->shape.size() != 2) return {};
  using runtime::LossHeadKind;
  using runtime::LossHeadOperand;
  const std::vector<int64_t> &x = inputs[0]->shape, &weight = inputs[2]->shape;
  const LossHeadKind kind = inputs.size() == 3 ? LossHeadKind::Forward : LossHeadKind::Backward;
  // A workspace rule sees no attributes: `wrt` is the operand whose shape
  // the result has; when x and weight agree ([N, H] with N = V), the larger
  // rule (the weight's) holds either.
  const LossHeadOperand wrt =
      output.shape == weight ? LossHeadOperand::Weight : LossHeadOperand::Input;
  return {runtime::linearCrossEntropyWorkBytes(kind, wrt, x[0], weight[0], x[1], inputs[0]->dtype),
          output.name + ".logits"};
}

Workspace sdpaBackwardWorkspace(const Buffer &output, std::span<const Buffer *const> inputs,
                                int64_t) {
  // q [B, H, T, E], k [B, Hkv, S, E], v, g[, mask]: checked by the
  // family's rule before the executor allocates. `wrt` from the result's
  // shape (a workspace rule sees no attributes): q's, else k's or v's,
  // sized for the larger head dim.
  if (inputs.size() < 4 || inputs[0]->shape.size() != 4 || inputs[1]->shape.size() != 4 ||
      inputs[2]->shape.size() != 4)
    return {};
  using runtime::AttentionOperand;
  const std::vector<int64_t> &q = inputs[0]->shape, &k = inputs[1]->shape, &v = inputs[2]->shape;
  const AttentionOperand wrt = output.shape == q ? AttentionOperand::Q : AttentionOperand::K;
  return {runtime::sdpaBackwardWorkBytes(wrt, q[1], k[1], q[2], k[2], std::max(k[3], v[3]),
                                         inputs[0]->dtype),
          output.name + ".attention"};
}

Workspace reduceScatterWorkspace(const Buffer &output, std::span<const Buffer *const> inputs,
                                 int64_t) {
  // One window of a root's rows as received (the gradient's dtype), and
  // their running sums in double (runtime/Optimizers.h).
  const plan::DType gradDtype = inputs.empty() ? output.dtype : inputs[0]->dtype;
  return {runtime::reduceScatterWorkBytes(output.shape, output.dtype, gradDtype),
          output.name + ".reduce"};
}

Workspace allReduceWorkspace(const Buffer &output, std::span<const Buffer *const>,
                             int64_t worldSize) {
  // Every rank's value as gathered, rank 0's first; the sum is taken from
  // there in rank order (runtime/cpu/TrainingKernels.cpp).
  if (worldSize < 1 || output.bytes > std::numeric_limits<int64_t>::max() / worldSize)
    return {-1, output.name + ".ranks"};
  return {output.bytes * worldSize, output.name + ".ranks"};
}

// ---- the table -------------------------------------------------------------

// One attribute array per op; a trailing empty spec keeps every array
// non-empty (it is cut off by the span below).
#define SHARDC_OP(code, name, minIn, maxIn, outs, memory, workspace, ...) \
  constexpr AttrSpec code##Attrs[] = {__VA_ARGS__ __VA_OPT__(, ) AttrSpec{}};
#include "runtime/OpTable.def"
#undef SHARDC_OP

using runtime::AttentionKind;
using runtime::CompareOp;
using runtime::ConvKind;
using runtime::ExpertsKind;
using runtime::IndexKind;
using runtime::LossHeadKind;
using runtime::PoolKind;
using runtime::ReduceKind;
using runtime::UnaryOp;

const OpInfo kOps[] = {
#define SHARDC_OP(code, name, minIn, maxIn, outs, memory, workspace, ...)              \
  OpInfo{OpCode::code,   name, minIn, maxIn, outs, OpMemory::memory, workspace,         \
         std::span<const AttrSpec>(code##Attrs, std::size(code##Attrs) - 1)},
#define SHARDC_FAMILY_OP(code, name, family, variant, minIn, maxIn, outs, memory, workspace,  \
                         ...)                                                                 \
  OpInfo{OpCode::code,   name, minIn, maxIn, outs, OpMemory::memory, workspace,               \
         std::span<const AttrSpec>(code##Attrs, std::size(code##Attrs) - 1),                  \
         OpFamily::family, static_cast<int>(variant)},
#include "runtime/OpTable.def"
#undef SHARDC_OP
};

}  // namespace

const AttrSpec *OpInfo::attr(std::string_view wanted) const {
  for (const AttrSpec &spec : attrs)
    if (wanted == spec.name) return &spec;
  return nullptr;
}

std::span<const OpInfo> allOps() { return kOps; }

const OpInfo &opInfo(OpCode code) { return kOps[static_cast<size_t>(code)]; }

int overwritableOperand(OpCode code) {
  switch (code) {
  case OpCode::EmbeddingBackward: return 2;
  case OpCode::CrossEntropyBackward: return 0;
  default: return -1;
  }
}

std::optional<OpCode> parseOpCode(std::string_view name) {
  for (const OpInfo &info : kOps)
    if (name == info.name) return info.code;
  return std::nullopt;
}

std::string opNameList() {
  std::string out;
  for (const OpInfo &info : kOps) {
    if (!out.empty()) out += ", ";
    out += info.name;
  }
  return out;
}

const char *opMemoryName(OpMemory memory) {
  switch (memory) {
  case OpMemory::Allocates: return "allocates";
  case OpMemory::Frees: return "frees";
  case OpMemory::WritesOutput: return "writes output";
  case OpMemory::InPlace: return "in place";
  case OpMemory::Collective: return "collective";
  }
  return "?";
}

const char *opFamilyName(OpFamily family) {
  switch (family) {
  case OpFamily::None: return "none";
  case OpFamily::Conv: return "convolution";
  case OpFamily::Pool: return "pooling";
  case OpFamily::AdaptivePool: return "adaptive pooling";
  case OpFamily::BatchNorm: return "batch norm";
  case OpFamily::GroupNorm: return "group norm";
  case OpFamily::Reduce: return "reduction";
  case OpFamily::Unary: return "unary";
  case OpFamily::View: return "view";
  case OpFamily::Index: return "index";
  case OpFamily::Experts: return "experts";
  case OpFamily::LossHead: return "loss head";
  case OpFamily::Attention: return "attention";
  case OpFamily::Compare: return "comparison";
  case OpFamily::Where: return "where";
  case OpFamily::Cast: return "cast";
  case OpFamily::Scan: return "scan";
  case OpFamily::Sample: return "sample";
  case OpFamily::Random: return "random";
  case OpFamily::AllReduce: return "all-reduce";
  }
  return "?";
}

const char *attrKindName(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int: return "integer";
  case AttrKind::Float: return "float";
  case AttrKind::String: return "string";
  case AttrKind::IntList: return "integer list";
  }
  return "?";
}

}  // namespace shardc::plan
