// Plan <-> JSON ("shardc-plan", version kPlanVersion).
//
// Format:
//   {"format":"shardc-plan","version":1,"world_size":N,
//    "params":[{"name","dtype","shape","device","unit","is_buffer","chunk_rows"}],
//    "functions":[{"name","buffers":[{"id","name","dtype","shape","bytes",
//                                     "category","param"?,"alias_of"?,
//                                     "byte_offset"?}],
//                  "inputs":[ids],"outputs":[ids],
//                  "body":[{"op","inputs","outputs","attrs":{...},"loc"}]}]}
//
// Attribute values keep their C++ type through a round trip:
//   int64             -> JSON integer            (1)
//   double, finite    -> JSON float              (1.0, 0.1, -0.0, 1e-300)
//                        nlohmann always prints a float with a '.' or exponent
//                        and with the shortest digits that parse back to the
//                        same bits, so the value round-trips exactly.
//   double, non-finite-> {"f64": "nan" | "inf" | "-inf"}  (JSON has no NaN)
//   string            -> JSON string
//   int list          -> JSON array of integers
#pragma once

#include "runtime/Plan.h"

#include <string>

namespace shardc::runtime {

std::string planToJson(const plan::Plan &plan);

/// Parses and fully validates (structure here, semantics via checkPlan).
/// Never crashes on any input; throws RuntimeError
/// "<sourceName>: <json path>: <reason>".
plan::Plan planFromJson(const std::string &text, const std::string &sourceName);

}  // namespace shardc::runtime
