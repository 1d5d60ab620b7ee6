// Shared pieces of shardc-gpu-tests' sections: the result table (stdout)
// and its JSON form, exception guards, device scratch buffers and timing.
#pragma once

#include "runtime/Plan.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/init/Generators.h"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace shardc::gpucheck {

/// One row of the table: `section | item | ok/FAIL | detail`, also kept for
/// the results JSON (writeResultsJson).
void report(const std::string &section, const std::string &item, bool ok,
            const std::string &detail);
/// Runs `body`; an exception is a failure of `item`.
void guarded(const std::string &section, const std::string &item,
             const std::function<void()> &body);
/// Failed rows so far.
int failures();
/// Every row so far as a JSON array of {section, item, ok, detail}.
void writeResultsJson(const std::string &path);

/// An accounted device buffer (category activation) released on scope exit.
struct DeviceBytes {
  runtime::cuda::CudaBuffer buffer;
  DeviceBytes(runtime::cuda::CudaDevice &device, size_t bytes, const std::string &label);
  std::byte *data() const { return buffer.data(); }
};

std::vector<std::byte> download(runtime::cuda::CudaDevice &device, const void *src, size_t bytes);
/// Elements (of `elementSize` bytes) whose bytes differ.
int64_t countMismatches(const std::vector<std::byte> &a, const std::vector<std::byte> &b,
                        int64_t elementSize);
/// A generator spec with fixed seed, stream and parameters per kind.
runtime::init::GeneratorSpec specFor(runtime::init::GeneratorKind kind, std::vector<int64_t> shape);
/// Mean milliseconds of `body` on the device's stream (one warm-up run).
double timeMs(runtime::cuda::CudaDevice &device, const std::function<void()> &body, int repeats);

}  // namespace shardc::gpucheck
