// Kernels that fill whole Philox blocks of a random generator: block b covers
// elements [b*4, b*4+4) on the float32 path and [b*2, b*2+2) on the float64
// path (docs/rng.md). The scalar ones are the reference; the AVX2 and
// AVX-512 ones do 32 blocks (128 floats) per step, as interleaved sets of 8
// or 16 lanes, and must give the same bits.
#pragma once

#include "runtime/init/PreparedGenerator.h"

#include <cstdint>

namespace shardc::runtime::init {

/// out[0 .. blocks*4) = float32-path values of elements firstBlock*4 ...
void scalarBlocksF(const PreparedGenerator &g, uint64_t firstBlock, int64_t blocks, float *out);
/// out[0 .. blocks*2) = float64-path values of elements firstBlock*2 ...
void scalarBlocksD(const PreparedGenerator &g, uint64_t firstBlock, int64_t blocks, double *out);

inline constexpr int kAvx2BlocksPerStep = 32;  // two interleaved sets of 8 lanes
/// As scalarBlocksF; `blocks` must be a multiple of kAvx2BlocksPerStep. Call
/// only when useAvx2().
void avx2BlocksF(const PreparedGenerator &g, uint64_t firstBlock, int64_t blocks, float *out);

inline constexpr int kAvx512BlocksPerStep = 32;  // two interleaved sets of 16 lanes
/// As scalarBlocksF; `blocks` must be a multiple of kAvx512BlocksPerStep.
/// Call only when useAvx512().
void avx512BlocksF(const PreparedGenerator &g, uint64_t firstBlock, int64_t blocks, float *out);

}  // namespace shardc::runtime::init
