// Hand-built plans shared by the tests.
#pragma once

#include "runtime/Plan.h"

namespace shardc::test {

/// The seed case (README.md): param p1 float32 [rows, cols] FSDP-sharded over
/// worldSize ranks. init: alloc p1 + fill 1.0. forward(x: [1]):
/// alloc p1.gathered; all_gather p1 -> p1.gathered; alloc y;
/// add(p1.gathered, x) -> y; free p1.gathered; return y.
plan::Plan seedPlan(int64_t worldSize, int64_t rows = 1024, int64_t cols = 1024,
                    double value = 1.0);

}  // namespace shardc::test
