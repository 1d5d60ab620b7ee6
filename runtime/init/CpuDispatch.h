// Chooses between the AVX-512, AVX2+FMA and portable scalar kernels at run
// time: the binary is built for baseline x86-64 (no -mavx2), so it runs
// anywhere, and uses AVX2 / AVX-512 only where the CPU has them. All give
// the same bits.
#pragma once

namespace shardc::runtime::init {

/// True when the CPU has AVX2 and FMA, SHARDC_NO_AVX2 is not set to a
/// non-empty value other than "0", and setAvx2Allowed(false) was not called.
bool useAvx2();

/// Test hook: forbid (false) or re-allow (true) the AVX2 path process-wide.
void setAvx2Allowed(bool allowed);

/// Whether the CPU itself supports the AVX2 path (ignores the switches).
bool cpuHasAvx2Fma();

/// True when useAvx2() holds, the CPU (and OS) support AVX-512F and DQ,
/// SHARDC_NO_AVX512 is not set to a non-empty value other than "0", and
/// setAvx512Allowed(false) was not called. Forbidding AVX2 forbids AVX-512.
bool useAvx512();

/// Test hook: forbid (false) or re-allow (true) the AVX-512 path.
void setAvx512Allowed(bool allowed);

/// Whether the CPU itself supports the AVX-512 path (ignores the switches).
bool cpuHasAvx512();

}  // namespace shardc::runtime::init
