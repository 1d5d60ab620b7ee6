// The unit tests run the backend suite (BackendSuiteTest.cpp) on the CPU.
#include "BackendSuite.h"

namespace shardc::test::suite {

std::vector<BackendUnderTest> backendsUnderTest() {
  return {cpuBackendUnderTest(2)};  // two kernel threads: the parallel paths too
}

}  // namespace shardc::test::suite
