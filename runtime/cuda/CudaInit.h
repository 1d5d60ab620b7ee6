// The init instructions on a CUDA device: generators, pointwise ops, fill.
//
// Same contract as the CPU functions they mirror (runtime/init/Generators.h,
// Pointwise.h, runtime/Kernels.h), same validation and error messages, and
// the same bits: the kernels call the recipes of runtime/init/Recipes.h and
// InitMath.h (compiled __host__ __device__, no contraction of separate
// multiplies and adds) and round to 16-bit types with DeviceFloat.h.
// Pointers are device pointers; work is enqueued on device.stream() and not
// waited for (errors of the launch itself are reported).
#pragma once

#include "runtime/IndexMapProgram.h"
#include "runtime/Plan.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/init/Generators.h"
#include "runtime/init/Pointwise.h"

#include <cstdint>

namespace shardc::runtime::cuda {

/// init::generateRange into device memory.
void generateRange(CudaDevice &device, const init::GeneratorSpec &spec, plan::DType dtype,
                   int64_t begin, int64_t count, void *out);

/// init::generateAt: out[k] = element indices[k]; `indices` is a device
/// array of `count` flat indices, each already checked to be inside the
/// generated tensor by the caller (generateAtHost checks).
void generateAtDevice(CudaDevice &device, const init::GeneratorSpec &spec, plan::DType dtype,
                      const int64_t *deviceIndices, int64_t count, void *out);

/// Backend::generateMapped: out[k] = the generator's source element
/// indexmap::mapIndex(map, begin + k), every index mapped on the device in
/// one launch. Waits for it (one 8-byte read) and returns -1, or the first
/// k whose element does not map.
int64_t generateMapped(CudaDevice &device, const init::GeneratorSpec &spec, plan::DType dtype,
                       const IndexMapProgram &map, int64_t begin, int64_t count, void *out);

/// init::applyPointwise on device memory.
void applyPointwise(CudaDevice &device, init::PointwiseKind kind, double a, double b,
                    plan::DType dtype, void *data, int64_t count);

/// runtime::fill (Kernels.h): value converted to float first for 16-bit types.
void fill(CudaDevice &device, plan::DType dtype, void *data, int64_t elements, double value);

/// runtime::shardedFill: the first validRows * rowElements elements get
/// `value`, the rest of localElements is zeroed.
void shardedFill(CudaDevice &device, plan::DType dtype, void *data, int64_t localElements,
                 int64_t validRows, int64_t rowElements, double value);

/// cudaMemsetAsync(data, 0, bytes) on the device's stream.
void zeroBytes(CudaDevice &device, void *data, int64_t bytes);

}  // namespace shardc::runtime::cuda
