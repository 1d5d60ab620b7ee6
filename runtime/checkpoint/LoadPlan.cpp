#include "runtime/checkpoint/LoadPlan.h"

#include "runtime/Kernels.h"
#include "runtime/PlanCheck.h"
#include "runtime/checkpoint/SafetensorsIndex.h"
#include "runtime/checkpoint/ShardReader.h"

#include <algorithm>
#include <map>
#include <memory>

namespace shardc::runtime::checkpoint {
using namespace shardc::plan;

namespace {
const std::string *stringAttr(const Instruction &inst, const char *name) {
  auto it = inst.attrs.find(name);
  return it == inst.attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
}
}  // namespace

void checkPlanLoads(const Plan &plan) {
  const Function *init = plan.function("init");
  if (!init) return;
  std::map<std::string, std::shared_ptr<Checkpoint>> open;
  for (const Instruction &inst : init->body) {
    if (inst.op != OpCode::Load || inst.outputs.size() != 1) continue;
    const Buffer &b = init->buffers.at(inst.outputs[0]);
    const std::string *file = stringAttr(inst, "file"), *tensor = stringAttr(inst, "tensor");
    if (!b.param || !file || !tensor) continue;  // the executor reports those
    const Param &p = plan.params[*b.param];
    if (file->empty())
      throw CheckpointError(inst.loc + ": parameter '" + p.name +
                            "' is loaded from no file: give \"file\" or run with --load CKPT");
    auto &checkpoint = open[*file];
    if (!checkpoint) checkpoint = Checkpoint::open(*file);
    const TensorLocation *where = checkpoint->find(*tensor);
    if (!where)
      throw CheckpointError(checkpoint->path() + ": tensor '" + *tensor +
                            "': not in the checkpoint (wanted by parameter '" + p.name + "')");
    const TensorEntry &e = *where->entry;
    if (e.shape != p.shape)
      throw CheckpointError(where->file->path() + ": tensor '" + *tensor + "': shape " +
                            shapeToString(e.shape) + " does not match parameter '" + p.name +
                            "' " + shapeToString(p.shape));
    if ((e.dtype == DType::I64) != (p.dtype == DType::I64))
      throw CheckpointError(
          where->file->path() + ": tensor '" + *tensor + "': is " + safetensorsDTypeName(e.dtype) +
          (p.dtype == DType::I64
               ? "; the int64 buffer '" + p.name + "' loads from an I64 tensor"
               : "; parameters load from floating tensors (F32, F64, F16, BF16)"));
  }
}

namespace {
/// Bytes of the file's dtype per element a load converts through the io
/// buffer: 0 when the file's tensor already has the shard's dtype (read
/// straight into the shard), 8 (the widest) when the file cannot be read
/// yet (checkPlanLoads reports why).
int64_t convertedElementBytes(const Instruction &load, const Buffer &target,
                              std::map<std::string, std::shared_ptr<Checkpoint>> &open) {
  const std::string *file = stringAttr(load, "file"), *tensor = stringAttr(load, "tensor");
  if (!file || !tensor || file->empty()) return 8;
  try {
    auto &checkpoint = open[*file];
    if (!checkpoint) checkpoint = Checkpoint::open(*file);
    const TensorLocation *where = checkpoint->find(*tensor);
    if (!where) return 8;
    return where->entry->dtype == target.dtype ? 0 : dtypeSize(where->entry->dtype);
  } catch (const CheckpointError &) {
    return 8;
  }
}
}  // namespace

void setIoBufferCap(Plan &plan, int64_t cap) {
  if (cap < 8) throw RuntimeError("io buffer must hold at least 8 bytes");
  std::map<std::string, std::shared_ptr<Checkpoint>> open;
  for (Function &f : plan.functions) {
    bool loads = false;
    int64_t need = 0;  // bytes of the largest converted shard, in its file dtype
    for (const Instruction &inst : f.body)
      if (inst.op == OpCode::Load && inst.outputs.size() == 1) {
        loads = true;
        const Buffer &b = f.buffers.at(inst.outputs[0]);
        const int64_t elements = numElements(b.shape), size = convertedElementBytes(inst, b, open);
        need = std::max(need, std::min(cap, elements * size));  // elements < 2^60
      }
    if (!loads) continue;
    // Whole 8-byte words (the buffer is typed F64), at most the cap.
    const int64_t bytes = std::min((need + 7) / 8 * 8, cap / 8 * 8);
    for (Buffer &b : f.buffers)
      if (b.name == kIoBufferName && !b.param && !b.aliasOf) {
        b.bytes = bytes;
        b.dtype = DType::F64;  // raw bytes
        b.shape = {bytes / 8};
      }
  }
}

}  // namespace shardc::runtime::checkpoint
