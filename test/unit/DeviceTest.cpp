#include "runtime/Device.h"
#include "runtime/DeviceName.h"
#include "runtime/MemoryLedger.h"

#include <catch2/catch.hpp>

#include <cstdint>

using namespace shardc::runtime;
using shardc::plan::Category;

TEST_CASE("CpuDevice counts exact bytes, peak and live-at-peak", "[device]") {
  CpuDevice device;
  {
    DeviceBuffer a = device.allocate(3, Category::Parameter, "a");
    CHECK(reinterpret_cast<uintptr_t>(a.data()) % 64 == 0);
    DeviceBuffer b = device.allocate(100, Category::Gathered, "b");
    CHECK(device.currentBytes() == 103);
    CHECK(device.currentBytes(Category::Gathered) == 100);
    b.release();
    CHECK(device.currentBytes() == 3);
    DeviceBuffer c = device.allocate(100, Category::Activation, "c");  // ties the peak
    CHECK(device.peakBytes() == 103);
    // The snapshot is of the moment the peak was first reached.
    CHECK(device.liveAtPeak() == std::vector<LiveAllocation>{{"a", Category::Parameter, 3},
                                                             {"b", Category::Gathered, 100}});
    device.resetPeak();
    CHECK(device.peakBytes() == 103);
    CHECK(device.liveAtPeak() == std::vector<LiveAllocation>{{"a", Category::Parameter, 3},
                                                             {"c", Category::Activation, 100}});
    DeviceBuffer moved = std::move(c);
    CHECK(device.currentBytes() == 103);
    DeviceBuffer zero = device.allocate(0, Category::IO, "zero");
    CHECK(zero.data() != nullptr);
  }
  CHECK(device.currentBytes() == 0);
  CHECK(device.live().empty());
  CHECK_THROWS(device.allocate(-1, Category::IO, "neg"));
}

TEST_CASE("the peak snapshot survives releases after the peak and moves with a new one",
          "[device]") {
  // The ledger keeps the snapshot without copying the live set at each new
  // peak: what was released after the peak must still be in it, in
  // allocation order, and a later, higher peak must replace it.
  MemoryLedger ledger;
  const uint64_t a = ledger.record({"a", Category::Parameter, 10});
  const uint64_t b = ledger.record({"b", Category::Activation, 20});
  const uint64_t c = ledger.record({"c", Category::Activation, 30});  // peak 60
  ledger.release(a);
  ledger.release(c);
  const uint64_t d = ledger.record({"d", Category::Activation, 25});  // 45: no new peak
  CHECK(ledger.peakBytes() == 60);
  CHECK(ledger.liveAtPeak() == std::vector<LiveAllocation>{{"a", Category::Parameter, 10},
                                                           {"b", Category::Activation, 20},
                                                           {"c", Category::Activation, 30}});
  const uint64_t e = ledger.record({"e", Category::Gathered, 40});  // 85: a new peak
  ledger.release(b);
  CHECK(ledger.peakBytes() == 85);
  CHECK(ledger.liveAtPeak() == std::vector<LiveAllocation>{{"b", Category::Activation, 20},
                                                           {"d", Category::Activation, 25},
                                                           {"e", Category::Gathered, 40}});
  ledger.resetPeak();  // the window restarts at what is live now: d and e
  ledger.release(d);
  CHECK(ledger.peakBytes() == 65);
  CHECK(ledger.liveAtPeak() == std::vector<LiveAllocation>{{"d", Category::Activation, 25},
                                                           {"e", Category::Gathered, 40}});
  ledger.release(e);
  CHECK(ledger.empty());
}

TEST_CASE("device names: cuda is GPU 0, cuda:N is GPU N, anything else is no GPU",
          "[device][names]") {
  using shardc::runtime::cudaOrdinalOf;
  CHECK(cudaOrdinalOf("cuda") == 0);
  CHECK(cudaOrdinalOf("cuda:0") == 0);
  CHECK(cudaOrdinalOf("cuda:7") == 7);
  for (const char *name : {"cpu", "gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda 1",
                           "CUDA", "cuda:99999999999"})
    CHECK_FALSE(cudaOrdinalOf(name));
}
