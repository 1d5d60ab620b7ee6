// Where a function's time goes, op by op: `shardc run --profile`.
//
// The executor times each instruction it runs on a rank (after the
// backend's finish(), so an asynchronous backend's kernel is inside its
// op's time) and adds it to the op's total. Instructions are grouped by op
// name (`linear`, `sdpa`, `alloc`, `all_gather`, ...): the question a user
// asks of a slow forward is which kind of op to look at, and the plan
// listing (`shardc compile`) names the instances.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace shardc::runtime {

struct OpTime {
  int64_t calls = 0;
  double seconds = 0;
};

struct OpProfile {
  std::map<std::string, OpTime> byOp;
  /// Functions (forwards) the totals cover: RunReport divides by it.
  int64_t functions = 0;

  void add(const std::string &op, double seconds) {
    OpTime &time = byOp[op];
    ++time.calls;
    time.seconds += seconds;
  }
  double totalSeconds() const {
    double total = 0;
    for (const auto &[op, time] : byOp) total += time.seconds;
    return total;
  }
};

}  // namespace shardc::runtime
