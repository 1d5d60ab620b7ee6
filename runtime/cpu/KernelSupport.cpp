#include "runtime/cpu/KernelSupport.h"

#include <cblas.h>

#include <mutex>

namespace shardc::runtime::cpu {

void singleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

}  // namespace shardc::runtime::cpu
