// Splits [0, count) into `threads` contiguous parts, one per thread (the
// caller runs the first). Init ops are pure per element, so how the range is
// split never changes results; this only spreads the work.
#pragma once

#include "runtime/JoiningThreads.h"

#include <algorithm>
#include <cstdint>

namespace shardc::runtime::init {

template <typename Body>  // Body(int64_t partBegin, int64_t partCount)
void parallelFor(int64_t count, int threads, const Body &body) {
  int64_t parts = std::clamp<int64_t>(threads, 1, std::max<int64_t>(count, 1));
  if (parts == 1) {
    body(0, count);
    return;
  }
  auto partBegin = [&](int64_t p) { return count / parts * p + std::min(p, count % parts); };
  JoiningThreads workers;
  int64_t p = 1;
  for (; p < parts; ++p)
    if (!workers.start([&, p] { body(partBegin(p), partBegin(p + 1) - partBegin(p)); })) break;
  // Parts whose thread the OS refused run here: slower, same results.
  for (int64_t q = p; q < parts; ++q) body(partBegin(q), partBegin(q + 1) - partBegin(q));
  body(0, partBegin(1));
  workers.joinAll();
}

}  // namespace shardc::runtime::init
