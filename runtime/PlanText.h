// A readable, line-per-item text form of a Plan, for FileCheck tests of the
// lowering (`shardc-opt -tc-print-plan`) and for people reading a plan. Not
// parsed back: the serialized form is PlanJson.
//
//   plan world_size=2
//   param @p1 float32 [1024, 1024] chunk_rows=512 unit="root"
//   function @forward(%1) -> (%3)
//     %0 = param @p1 float32 [512, 1024] 2097152 bytes parameters
//     %2 = buffer "p1.gathered" float32 [1024, 1024] 4194304 bytes gathered
//     %4 = alias "v" float32 [1048576] of %2 + 0
//     alloc %2
//     all_gather %0 -> %2 {offsets = [0]}
//     free %2
#pragma once

#include "runtime/Plan.h"

#include <string>

namespace shardc::runtime {

std::string planToText(const plan::Plan &plan);

}  // namespace shardc::runtime
