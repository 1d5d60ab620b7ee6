// Which vector kernels the suite compared, where ctest's closing summary
// shows it.
//
// The kernel comparisons (InitRngVectorsTest, InitGeneratorsTest,
// InitPointwiseTest) can only run a kernel the CPU has: without AVX-512 the
// "AVX-512" pass quietly runs the AVX2 kernel again. This hidden case runs
// as its own ctest test, unit-cpu-features (test/unit/CMakeLists.txt): when
// a kernel cannot run (the CPU lacks it, or SHARDC_NO_AVX2 / SHARDC_NO_AVX512
// forbid it) it prints "SKIPPED: ...", which ctest's SKIP_REGULAR_EXPRESSION
// turns into "Skipped" in the closing summary ("The following tests did not
// run"), instead of a silent pass.
#include "runtime/init/CpuDispatch.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

using namespace shardc::runtime::init;

TEST_CASE("every vector kernel the suite compares ran on this machine", "[.][cpu-features]") {
  // The dispatch follows the CPU unless a switch forbids a kernel.
  if (useAvx512()) CHECK(cpuHasAvx512());
  if (useAvx2()) CHECK(cpuHasAvx2Fma());
  std::string missing;
  if (!useAvx2()) missing += cpuHasAvx2Fma() ? " AVX2+FMA (SHARDC_NO_AVX2 set)" : " AVX2+FMA (not on this CPU)";
  if (!useAvx512())
    missing += cpuHasAvx512() ? " AVX-512 (SHARDC_NO_AVX512 set, or AVX2 forbidden)"
                              : " AVX-512F/DQ (not on this CPU)";
  if (missing.empty())
    std::printf("compared: AVX-512, AVX2 and scalar kernels\n");
  else
    std::printf("SKIPPED: kernels not compared with the scalar ones:%s\n", missing.c_str());
}
