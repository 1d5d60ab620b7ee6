// Facts about a Plan that reports and tools print.
#pragma once

#include "runtime/Plan.h"

#include <string>
#include <vector>

namespace shardc::runtime {

/// A parameter whose init is not shardable: computed in full on `owner`
/// and scattered (DESIGN.md, "Init programs and shardability").
struct ScatteredParam {
  std::string name;
  int64_t fullBytes = 0;
  int64_t owner = 0;
};

/// Every parameter the init function scatters, in plan order.
std::vector<ScatteredParam> scatteredParams(const plan::Plan &plan);

}  // namespace shardc::runtime
