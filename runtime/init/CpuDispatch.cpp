#include "runtime/init/CpuDispatch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace shardc::runtime::init {
namespace {

bool envForbids(const char *variable) {
  const char *value = std::getenv(variable);
  return value && *value && std::strcmp(value, "0") != 0;
}

std::atomic<bool> &allowedFlag() {
  static std::atomic<bool> allowed{!envForbids("SHARDC_NO_AVX2")};
  return allowed;
}

std::atomic<bool> &avx512AllowedFlag() {
  static std::atomic<bool> allowed{!envForbids("SHARDC_NO_AVX512")};
  return allowed;
}

}  // namespace

bool cpuHasAvx2Fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

bool useAvx2() { return cpuHasAvx2Fma() && allowedFlag().load(std::memory_order_relaxed); }

void setAvx2Allowed(bool allowed) { allowedFlag().store(allowed, std::memory_order_relaxed); }

bool cpuHasAvx512() {
#if defined(__x86_64__)
  // libgcc's check includes the OS saving the AVX-512 state (XCR0).
  static const bool has = cpuHasAvx2Fma() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512dq");
  return has;
#else
  return false;
#endif
}

bool useAvx512() {
  return useAvx2() && cpuHasAvx512() && avx512AllowedFlag().load(std::memory_order_relaxed);
}

void setAvx512Allowed(bool allowed) {
  avx512AllowedFlag().store(allowed, std::memory_order_relaxed);
}

}  // namespace shardc::runtime::init
