#include "runtime/ResidentMemory.h"

#include "runtime/LocalRun.h"

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace shardc::runtime {

std::optional<ResidentSet> readResidentSet() {
  std::ifstream status("/proc/self/status");
  if (!status) return std::nullopt;
  std::optional<int64_t> rss, hwm;
  std::string line;
  while (std::getline(status, line)) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %lld kB", &kib) == 1) rss = kib * 1024;
    if (std::sscanf(line.c_str(), "VmHWM: %lld kB", &kib) == 1) hwm = kib * 1024;
  }
  if (!rss || !hwm) return std::nullopt;
  return ResidentSet{*rss, *hwm};
}

bool ResidentPeakWindow::start() {
  started_ = false;
  // Freed heap memory that glibc still holds would be reused inside the
  // window without counting as growth: give it back first.
  malloc_trim(0);
  std::ofstream clear("/proc/self/clear_refs");
  if (!clear) return false;
  clear << "5";  // "reset the peak resident set size to the current" (proc(5))
  clear.close();
  if (!clear) return false;
  std::optional<ResidentSet> now = readResidentSet();
  if (!now) return false;
  baseline_ = now->bytes;
  started_ = true;
  return true;
}

std::optional<int64_t> ResidentPeakWindow::peakGrowthBytes() const {
  if (!started_) return std::nullopt;
  std::optional<ResidentSet> now = readResidentSet();
  if (!now) return std::nullopt;
  return std::max<int64_t>(0, now->peakBytes - baseline_);
}

int64_t ledgerPeakSumBytes(const RunResult &result) {
  int64_t sum = 0;
  for (const RankReport &rank : result.ranks)
    sum += std::max(rank.init.peakBytes, rank.forward ? rank.forward->peakBytes : 0);
  return sum;
}

int64_t heldPeakSumBytes(const RunResult &result) {
  int64_t sum = 0;
  for (const RankReport &rank : result.ranks)
    sum += std::max(rank.init.heldPeakBytes, rank.forward ? rank.forward->heldPeakBytes : 0);
  return sum;
}

int64_t hostCopyBytes(const RunResult &result, int64_t worldSize) {
  int64_t bytes = 0;
  for (const HostTensor &t : result.outputs) bytes += static_cast<int64_t>(t.data.size());
  bytes *= worldSize;  // every rank copies its outputs (they are compared)
  for (const HostTensor &t : result.params) bytes += static_cast<int64_t>(t.data.size());
  for (const auto &rank : result.shards)
    for (const HostTensor &t : rank) bytes += static_cast<int64_t>(t.data.size());
  return bytes;
}

}  // namespace shardc::runtime
