// The backend test suite (IREE's hal/cts is the model): the same cases, one
// plan per op of the op table, run through the executor core on every
// backend under test. The unit tests run it on the CPU backend; the GPU test
// binary runs it on the CUDA backend when a device is visible, with the CPU
// backend as the reference. An op in a backend's unsupported list must fail
// with the op's name instead.
#pragma once

#include "runtime/Backend.h"
#include "runtime/HostTensor.h"
#include "runtime/MemoryModel.h"
#include "runtime/Plan.h"

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace shardc::test::suite {

/// What one world-size-1 run of a plan's "init" then "forward" leaves.
struct SuiteRun {
  std::vector<runtime::HostTensor> outputs;  // forward's outputs, copied to the host
  int64_t initPeak = 0, forwardPeak = 0;     // measured by the device's ledger
  std::vector<runtime::LiveAllocation> initLiveAtPeak, forwardLiveAtPeak;
};

/// A device and backend for one run (destroyed in reverse order).
struct BackendInstance {
  std::shared_ptr<void> context;  // what the communicator needs (a LocalGroup)
  std::unique_ptr<runtime::Device> device;
  std::unique_ptr<runtime::Backend> backend;
  std::unique_ptr<runtime::Communicator> comm;  // world size 1
};

struct BackendUnderTest {
  std::string name;
  std::function<BackendInstance()> make;
};

/// The backends this binary tests (defined once per test binary).
std::vector<BackendUnderTest> backendsUnderTest();
/// The CPU backend with `threads` kernel threads on a world of one rank: the
/// suite's reference (1 thread) and the unit tests' backend under test.
BackendUnderTest cpuBackendUnderTest(int threads);

/// Runs init then forward of `plan` on a fresh instance of `backend`.
SuiteRun runSuitePlan(const BackendUnderTest &backend, const plan::Plan &plan,
                      const std::vector<runtime::HostTensor> &inputs, uint64_t seed);

}  // namespace shardc::test::suite
