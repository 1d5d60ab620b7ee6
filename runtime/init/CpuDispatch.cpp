#include "runtime/init/CpuDispatch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace shardc::runtime::init {
namespace {

bool envForbidsAvx2() {
  const char *value = std::getenv("SHARDC_NO_AVX2");
  return value && *value && std::strcmp(value, "0") != 0;
}

std::atomic<bool> &allowedFlag() {
  static std::atomic<bool> allowed{!envForbidsAvx2()};
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

}  // namespace shardc::runtime::init
