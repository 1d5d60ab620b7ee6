// The op table: every Plan opcode with its operand counts, attributes,
// memory behaviour and workspace rule, generated from runtime/OpTable.def.
//
// The one place op names live: the plan reader turns a name into an OpCode
// (an unknown name is rejected there, once), and everything after it (plan
// checks, the memory model, the executor core, the lowering, every backend)
// switches on OpCode. IREE's VM ISA table and torch-mlir's generated op
// definitions follow the same pattern.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace shardc::plan {

struct Buffer;

enum class OpCode : uint8_t {
#define SHARDC_OP(code, ...) code,
#include "runtime/OpTable.def"
#undef SHARDC_OP
};

/// What an instruction does to memory.
enum class OpMemory {
  Allocates,     // alloc: the output buffer becomes live
  Frees,         // free: the input buffer stops being live
  WritesOutput,  // a kernel writes an already allocated output
  InPlace,       // a kernel rewrites its one operand (inputs[0] == outputs[0])
  Collective,    // every rank runs it together; writes an allocated output
};
const char *opMemoryName(OpMemory memory);

enum class AttrKind { Int, Float, String, IntList };
const char *attrKindName(AttrKind kind);  // "integer", "float", "string", "integer list"

struct AttrSpec {
  const char *name = nullptr;
  AttrKind kind = AttrKind::Int;
  bool required = false;
};

/// Transient working memory of one instruction (e.g. orthogonal's QR
/// scalars): allocated by the executor core before the kernel, released
/// after it, mirrored by MemoryModel. bytes < 0: too large to hold.
struct Workspace {
  int64_t bytes = 0;
  std::string label;
};
/// The instruction's output, its inputs (in operand order; a rule that
/// needs an operand's shape, e.g. moe_experts' expert sizes, reads it here)
/// and the plan's world size (all_reduce_sum gathers every rank's value).
using WorkspaceRule = Workspace (*)(const Buffer &output, std::span<const Buffer *const> inputs,
                                    int64_t worldSize);

/// The op family of a SHARDC_FAMILY_OP (runtime/OpFamilies.h): it names the
/// op's shape and dtype rule and its Backend method (runtime/OpRules.h).
// View (as_strided): a strided read of the input, the views-and-copies family.
// Index (topk, gather): indices chosen by values, and reads at computed indices.
// Experts (moe_experts): a mixture of experts' experts, tokens grouped by expert.
// LossHead (linear_cross_entropy): a language model's head and loss, fused.
// Attention (sdpa_backward): attention's gradient, a block of queries at a time.
// Compare (eq, ne, lt, le, gt, ge), Where, Cast, Scan (cumsum): integer
// values, selection by them and dtype conversion, the ops that take int64
// operands besides float ones.
// Sample (grid_sample): reads of x at computed fractional positions.
// Random (dropout): values decided by a counter-based random mask (runtime/DropoutMask.h).
// AllReduce (all_reduce_sum): a value summed over the ranks, inside forward.
enum class OpFamily : uint8_t {
  None,
  Conv,
  Pool,
  AdaptivePool,
  BatchNorm,
  GroupNorm,
  Reduce,
  Unary,
  View,
  Index,
  Experts,
  LossHead,
  Attention,
  Compare,
  Where,
  Cast,
  Scan,
  Sample,
  Random,
  AllReduce
};
const char *opFamilyName(OpFamily family);

inline constexpr int kAny = -1;  // no upper bound on the operand count

struct OpInfo {
  OpCode code;
  const char *name;
  int minInputs, maxInputs, outputs;
  OpMemory memory;
  WorkspaceRule workspace;  // nullptr: none
  std::span<const AttrSpec> attrs;
  OpFamily family = OpFamily::None;  // None: a SHARDC_OP
  int variant = 0;                   // the family's enum value (UnaryOp, PoolKind, ...)

  /// A family op: one generic tc op, read and lowered from this table alone.
  bool generic() const { return family != OpFamily::None; }
  /// The attribute spec named `name`, or nullptr.
  const AttrSpec *attr(std::string_view name) const;
};

/// Every op, in OpCode order.
std::span<const OpInfo> allOps();
const OpInfo &opInfo(OpCode code);
inline const char *opName(OpCode code) { return opInfo(code).name; }
/// The operand a family op's output may share, -1 for none: the kernel
/// reads each element of it before writing that element (in-place safe).
/// embedding_backward's acc (2) and cross_entropy_backward's logits (0):
/// the lowering writes there when that operand dies at the op, so that a
/// tied table's gradient or a vocabulary's logits are not held twice.
int overwritableOperand(OpCode code);
/// nullopt for a name the table does not have.
std::optional<OpCode> parseOpCode(std::string_view name);
/// "alloc, free, fill, ..." for error messages.
std::string opNameList();

}  // namespace shardc::plan
