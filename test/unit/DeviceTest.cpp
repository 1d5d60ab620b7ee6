#include "runtime/Device.h"

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
