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
    if (e.dtype == DType::I64)
      throw CheckpointError(where->file->path() + ": tensor '" + *tensor +
                            "': is I64; parameters load from floating tensors (F32, F64, F16, "
                            "BF16)");
  }
}

void setIoBufferCap(Plan &plan, int64_t cap) {
  if (cap < 8) throw RuntimeError("io buffer must hold at least 8 bytes");
  for (Function &f : plan.functions) {
    int64_t maxElements = -1;
    for (const Instruction &inst : f.body)
      if (inst.op == OpCode::Load && inst.outputs.size() == 1) {
        const Buffer &b = f.buffers.at(inst.outputs[0]);
        maxElements = std::max(maxElements, numElements(b.shape));
      }
    if (maxElements < 0) continue;
    for (Buffer &b : f.buffers)
      if (b.name == kIoBufferName && !b.param && !b.aliasOf) {
        b.bytes = ioBufferBytesFor(maxElements, cap);
        b.dtype = DType::F64;  // raw bytes; 8-byte multiples
        b.shape = {b.bytes / 8};
      }
  }
}

}  // namespace shardc::runtime::checkpoint
