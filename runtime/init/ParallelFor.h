// Splits [0, count) into `threads` contiguous parts, one per thread (the
// caller runs the first). Init ops are pure per element, so how the range is
// split never changes results; this only spreads the work.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace shardc::runtime::init {

template <typename Body>  // Body(int64_t partBegin, int64_t partCount)
void parallelFor(int64_t count, int threads, const Body &body) {
  int64_t parts = std::clamp<int64_t>(threads, 1, std::max<int64_t>(count, 1));
  if (parts == 1) {
    body(0, count);
    return;
  }
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(parts - 1));
  auto partBegin = [&](int64_t p) { return count / parts * p + std::min(p, count % parts); };
  for (int64_t p = 1; p < parts; ++p)
    workers.emplace_back([&, p] { body(partBegin(p), partBegin(p + 1) - partBegin(p)); });
  body(0, partBegin(1));
  for (std::thread &worker : workers) worker.join();
}

}  // namespace shardc::runtime::init
