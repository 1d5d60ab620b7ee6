#include "runtime/PlanQueries.h"

namespace shardc::runtime {

std::vector<ScatteredParam> scatteredParams(const plan::Plan &plan) {
  std::vector<ScatteredParam> result;
  const plan::Function *init = plan.function("init");
  if (!init)
    return result;
  for (const plan::Instruction &instruction : init->body) {
    if (instruction.op != "scatter" || instruction.outputs.size() != 1)
      continue;
    const plan::Buffer &target = init->buffers.at(instruction.outputs[0]);
    if (!target.param)
      continue;
    const plan::Param &param = plan.params.at(*target.param);
    auto root = instruction.attrs.find("root");
    int64_t owner = root == instruction.attrs.end()
                        ? 0
                        : std::get<int64_t>(root->second);
    result.push_back({param.name, param.fullBytes(), owner});
  }
  return result;
}

}  // namespace shardc::runtime
