// Chooses between the AVX2+FMA kernels and the portable scalar ones at run
// time: the binary is built for baseline x86-64 (no -mavx2), so it runs
// anywhere, and uses AVX2 only where the CPU has it. Both give the same bits.
#pragma once

namespace shardc::runtime::init {

/// True when the CPU has AVX2 and FMA, SHARDC_NO_AVX2 is not set to a
/// non-empty value other than "0", and setAvx2Allowed(false) was not called.
bool useAvx2();

/// Test hook: forbid (false) or re-allow (true) the AVX2 path process-wide.
void setAvx2Allowed(bool allowed);

/// Whether the CPU itself supports the AVX2 path (ignores the switches).
bool cpuHasAvx2Fma();

}  // namespace shardc::runtime::init
