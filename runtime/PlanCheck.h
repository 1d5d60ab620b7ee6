// Semantic validation of a Plan, shared by the JSON reader and by every entry
// point that accepts an in-memory Plan (a hand-built or compiler-made Plan
// never went through the reader).
#pragma once

#include "runtime/Plan.h"

namespace shardc::runtime {

/// Throws RuntimeError naming the offending element by its JSON path
/// (e.g. "functions[1].buffers[3].bytes") and the reason. Checks: version,
/// world size, param shapes and sharding, unique names, buffer ids equal to
/// their index, non-negative shapes without overflow, bytes >= logical size,
/// param buffers matching their param (dtype, bytes == localBytes), and every
/// buffer id used by inputs/outputs/instructions in range, aliases (base in
/// range, no cycle, bytes == logical size, dtype-aligned offset, inside the
/// base, never alloc'd/freed, never a function input), and every `rank`
/// attribute (see executesOn). Opcodes are known by construction (OpCode;
/// the JSON reader rejects unknown names); operand counts and attributes are
/// checked against the op table by the executor core, with the instruction's
/// place.
void checkPlan(const plan::Plan &plan);

/// Rank-conditional instructions: an instruction carrying the int64 attribute
/// `rank` executes only on that rank and is skipped (alloc/free included, its
/// buffers untouched) on the others. checkPlan verifies the attribute is an
/// int64 in [0, world_size) and that no collective carries it.
bool executesOn(const plan::Instruction &inst, int64_t rank);

/// Opcodes all ranks must execute together (OpMemory::Collective).
bool isCollective(plan::OpCode op);

/// Bytes of `shape` x `dtype`, or -1 when it overflows int64 or a dim is < 0.
int64_t checkedLogicalBytes(const std::vector<int64_t> &shape, plan::DType dtype);

}  // namespace shardc::runtime

namespace shardc::runtime {
/// "function 'forward' instruction #3 'free' at model.py:12" — the prefix of
/// every error about one instruction (executor and memory model alike).
std::string instructionPlace(const plan::Function &function, size_t index);
}  // namespace shardc::runtime
