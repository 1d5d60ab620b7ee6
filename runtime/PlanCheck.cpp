#include "runtime/PlanCheck.h"

#include "runtime/RuntimeError.h"

#include <set>
#include <string>

namespace shardc::runtime {
using namespace shardc::plan;

namespace {

[[noreturn]] void fail(const std::string &path, const std::string &reason) {
  throw RuntimeError("invalid plan: " + path + ": " + reason);
}

std::string at(const std::string &base, const char *field, size_t index) {
  return base + "." + field + "[" + std::to_string(index) + "]";
}

void checkShape(const std::string &path, const std::vector<int64_t> &shape,
                DType dtype) {
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0)
      fail(path + "[" + std::to_string(i) + "]",
           "negative dimension " + std::to_string(shape[i]));
  if (checkedLogicalBytes(shape, dtype) < 0)
    fail(path, "shape is too large (byte size overflows int64)");
}

void checkParam(const Plan &plan, size_t index, std::set<std::string> &names) {
  const Param &p = plan.params[index];
  std::string path = "params[" + std::to_string(index) + "]";
  if (p.name.empty()) fail(path + ".name", "empty parameter name");
  if (!names.insert(p.name).second)
    fail(path + ".name", "duplicate parameter name '" + p.name + "'");
  checkShape(path + ".shape", p.shape, p.dtype);
  if (p.chunkRows < 0)
    fail(path + ".chunk_rows", "negative chunk_rows " + std::to_string(p.chunkRows));
  if (!p.persistent && !p.isBuffer && !isOptimizerState(p.name))
    fail(path + ".persistent", "'" + p.name +
                                   "' is a parameter and is always persistent (only buffers and "
                                   "optimizer state, optim.*, are not)");
  if (!p.tiedNames.empty() && p.isBuffer)
    fail(path + ".tied", "'" + p.name + "' is a buffer and cannot be tied");
  // A checkpoint holds every name once: tied names share the names' space.
  for (const std::string &tied : p.tiedNames)
    if (tied.empty() || !names.insert(tied).second)
      fail(path + ".tied", "tied name '" + tied + "' of '" + p.name +
                               "' is empty or already names a tensor");
  if (!p.sharded()) return;
  if (p.isBuffer)
    fail(path + ".chunk_rows", "'" + p.name + "' is a buffer and must not be sharded");
  if (p.shape.empty())
    fail(path + ".chunk_rows", "'" + p.name + "' is 0-d and must be replicated");
  // Overflow-safe: chunkRows * worldSize >= shape[0].
  if (p.chunkRows < (p.shape[0] + plan.worldSize - 1) / plan.worldSize)
    fail(path + ".chunk_rows",
         "chunk_rows " + std::to_string(p.chunkRows) + " x world_size " +
             std::to_string(plan.worldSize) + " does not cover " +
             std::to_string(p.shape[0]) + " rows of '" + p.name + "'");
  if (checkedLogicalBytes(p.localShape(), p.dtype) < 0)
    fail(path + ".chunk_rows", "local shard is too large (overflows int64)");
  int64_t gathered = 0;
  if (__builtin_mul_overflow(p.localBytes(), plan.worldSize, &gathered))
    fail(path + ".chunk_rows", "gathered size overflows int64");
}

void checkIds(const Function &f, const std::string &path,
              const std::vector<int32_t> &ids) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= f.buffers.size())
      fail(path + "[" + std::to_string(i) + "]",
           "buffer id " + std::to_string(ids[i]) + " out of range (function '" +
               f.name + "' has " + std::to_string(f.buffers.size()) + " buffers)");
}

void checkBuffer(const Plan &plan, const std::string &path, const Buffer &b,
                 size_t index) {
  if (b.id < 0 || static_cast<size_t>(b.id) != index)
    fail(path + ".id", "id " + std::to_string(b.id) + " must equal its index " +
                           std::to_string(index));
  checkShape(path + ".shape", b.shape, b.dtype);
  int64_t logical = checkedLogicalBytes(b.shape, b.dtype);
  if (b.aliasOf) return;  // checkAlias, once every buffer is known valid
  if (b.bytes < logical)
    fail(path + ".bytes", "bytes " + std::to_string(b.bytes) +
                              " is less than the logical size " +
                              std::to_string(logical) + " of '" + b.name + "'");
  if (!b.param) return;
  if (*b.param < 0 || static_cast<size_t>(*b.param) >= plan.params.size())
    fail(path + ".param", "param index " + std::to_string(*b.param) +
                              " out of range (plan has " +
                              std::to_string(plan.params.size()) + " params)");
  const Param &p = plan.params[*b.param];
  if (b.dtype != p.dtype)
    fail(path + ".dtype", std::string("buffer '") + b.name + "' is " +
                              dtypeName(b.dtype) + " but param '" + p.name +
                              "' is " + dtypeName(p.dtype));
  if (b.bytes != p.localBytes())
    fail(path + ".bytes", "buffer '" + b.name + "' has " + std::to_string(b.bytes) +
                              " bytes but param '" + p.name + "' stores " +
                              std::to_string(p.localBytes()) + " bytes per rank");
}

/// Buffer `index` is an alias: base in range, no cycle, bytes == logical
/// size, aligned to its dtype, inside the base, never a param.
void checkAlias(const Function &f, const std::string &path, const Buffer &b) {
  const int64_t logical = checkedLogicalBytes(b.shape, b.dtype);
  if (b.param) fail(path + ".param", "alias '" + b.name + "' cannot also be param storage");
  const int32_t baseId = *b.aliasOf;
  if (baseId < 0 || static_cast<size_t>(baseId) >= f.buffers.size())
    fail(path + ".alias_of", "buffer id " + std::to_string(baseId) + " out of range (function '" +
                                 f.name + "' has " + std::to_string(f.buffers.size()) +
                                 " buffers)");
  // Follow the chain: it must reach a real buffer within buffers.size() steps.
  int32_t at = baseId;
  for (size_t steps = 0; f.buffers[at].aliasOf; ++steps) {
    at = *f.buffers[at].aliasOf;
    if (steps > f.buffers.size() || at < 0 || static_cast<size_t>(at) >= f.buffers.size())
      fail(path + ".alias_of", "alias '" + b.name + "' is part of an alias cycle");
  }
  if (b.bytes != logical)
    fail(path + ".bytes", "alias '" + b.name + "' has bytes " + std::to_string(b.bytes) +
                              " but its logical size is " + std::to_string(logical) +
                              " (an alias is never allocated)");
  if (b.byteOffset < 0)
    fail(path + ".byte_offset", "negative byte_offset " + std::to_string(b.byteOffset));
  if (b.byteOffset % dtypeSize(b.dtype) != 0)
    fail(path + ".byte_offset", "byte_offset " + std::to_string(b.byteOffset) + " of alias '" +
                                    b.name + "' is not a multiple of its element size " +
                                    std::to_string(dtypeSize(b.dtype)));
  const Buffer &base = f.buffers[baseId];
  int64_t end = 0;
  if (__builtin_add_overflow(b.byteOffset, b.bytes, &end) || end > base.bytes)
    fail(path + ".byte_offset", "alias '" + b.name + "' covers bytes [" +
                                    std::to_string(b.byteOffset) + ", " +
                                    std::to_string(b.byteOffset) + " + " +
                                    std::to_string(b.bytes) + ") but its base '" + base.name +
                                    "' has " + std::to_string(base.bytes) + " bytes");
}

void checkFunction(const Plan &plan, size_t index, std::set<std::string> &names) {
  const Function &f = plan.functions[index];
  std::string path = "functions[" + std::to_string(index) + "]";
  if (f.name.empty()) fail(path + ".name", "empty function name");
  if (!names.insert(f.name).second)
    fail(path + ".name", "duplicate function name '" + f.name + "'");
  for (size_t b = 0; b < f.buffers.size(); ++b)
    checkBuffer(plan, at(path, "buffers", b), f.buffers[b], b);
  for (size_t b = 0; b < f.buffers.size(); ++b)
    if (f.buffers[b].aliasOf) checkAlias(f, at(path, "buffers", b), f.buffers[b]);
  checkIds(f, path + ".inputs", f.inputs);
  for (size_t i = 0; i < f.inputs.size(); ++i)
    if (f.buffers[f.inputs[i]].aliasOf)
      fail(at(path, "inputs", i), "alias '" + f.buffers[f.inputs[i]].name +
                                      "' cannot be a function input (inputs are allocated)");
  checkIds(f, path + ".outputs", f.outputs);
  for (size_t i = 0; i < f.body.size(); ++i) {
    std::string ipath = at(path, "body", i);
    checkIds(f, ipath + ".inputs", f.body[i].inputs);
    checkIds(f, ipath + ".outputs", f.body[i].outputs);
    const OpInfo &op = opInfo(f.body[i].op);
    if (op.memory == OpMemory::Allocates || op.memory == OpMemory::Frees)
      for (int32_t id : op.memory == OpMemory::Allocates ? f.body[i].outputs : f.body[i].inputs)
        if (f.buffers[id].aliasOf)
          fail(ipath, std::string("'") + op.name + "' of alias '" + f.buffers[id].name +
                          "': an alias is never allocated or freed (its base is)");
    auto rank = f.body[i].attrs.find("rank");
    if (rank == f.body[i].attrs.end()) continue;
    const int64_t *r = std::get_if<int64_t>(&rank->second);
    if (!r) fail(ipath + ".attrs.rank", "the 'rank' attribute must be an integer");
    if (*r < 0 || *r >= plan.worldSize)
      fail(ipath + ".attrs.rank", "rank " + std::to_string(*r) +
                                      " out of range for world size " +
                                      std::to_string(plan.worldSize));
    if (isCollective(f.body[i].op))
      fail(ipath + ".attrs.rank", std::string("collective '") + op.name +
                                      "' runs on every rank and must not carry 'rank'");
  }
}

}  // namespace

int64_t checkedLogicalBytes(const std::vector<int64_t> &shape, DType dtype) {
  int64_t bytes = dtypeSize(dtype);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes)) return -1;
  return bytes;
}

bool executesOn(const Instruction &inst, int64_t rank) {
  auto it = inst.attrs.find("rank");
  if (it == inst.attrs.end()) return true;
  const int64_t *r = std::get_if<int64_t>(&it->second);
  return !r || *r == rank;  // a non-integer is rejected by checkPlan
}

bool isCollective(OpCode op) { return opInfo(op).memory == OpMemory::Collective; }

void checkPlan(const Plan &plan) {
  if (plan.version != kPlanVersion)
    fail("version", "plan version " + std::to_string(plan.version) +
                        " is not supported (this runtime reads version " +
                        std::to_string(kPlanVersion) + ")");
  if (plan.worldSize < 1)
    fail("world_size", "world size must be >= 1, got " + std::to_string(plan.worldSize));
  std::set<std::string> paramNames, functionNames;
  for (size_t i = 0; i < plan.params.size(); ++i) checkParam(plan, i, paramNames);
  for (size_t i = 0; i < plan.functions.size(); ++i)
    checkFunction(plan, i, functionNames);
}

}  // namespace shardc::runtime

namespace shardc::runtime {
std::string instructionPlace(const plan::Function &function, size_t index) {
  std::string place = "function '" + function.name + "' instruction #" +
                      std::to_string(index);
  if (index < function.body.size()) {
    place += std::string(" '") + opName(function.body[index].op) + "'";
    if (!function.body[index].loc.empty()) place += " at " + function.body[index].loc;
  }
  return place;
}
}  // namespace shardc::runtime
