// The operating system's count of this process's resident memory: a check
// of the device ledger that does not go through it.
//
// Why: "predicted == measured" compares the memory model with the devices'
// byte counters, and both follow the plan's alloc/free stream. That proves
// the runtime follows the plan, not that the process uses that much memory
// (allocator rounding, reuse caches, kernel scratch and host copies are
// invisible to the ledger). The kernel's resident-set counters are: Linux
// keeps a high-water mark of the resident set (VmHWM in /proc/self/status)
// that writing "5" to /proc/self/clear_refs restarts at the current RSS.
#pragma once

#include <cstdint>
#include <optional>

namespace shardc::runtime {

struct RunResult;

/// Resident bytes of this process now and their high-water mark since the
/// last restart (VmRSS, VmHWM); nullopt where /proc does not say.
struct ResidentSet {
  int64_t bytes = 0;
  int64_t peakBytes = 0;
};
std::optional<ResidentSet> readResidentSet();

/// One measurement window: start() hands freed heap pages back to the
/// kernel (malloc_trim), restarts the high-water mark and remembers the
/// resident bytes as the baseline; peakGrowthBytes() is the high-water mark
/// since then minus that baseline. Process-wide: every thread's memory
/// counts, so at most one window should be open at a time.
class ResidentPeakWindow {
public:
  /// False (and every later query nullopt) where the kernel cannot restart
  /// the mark (no /proc, or clear_refs refused).
  bool start();
  std::optional<int64_t> peakGrowthBytes() const;
  int64_t baselineBytes() const { return baseline_; }

private:
  bool started_ = false;
  int64_t baseline_ = 0;
};

/// The ledger's figure the OS's is compared with: every rank's own peak
/// (the larger of init's and forward's), summed over ranks. Ranks are
/// threads of one process and their peaks need not coincide, so this bounds
/// the ledger's process-wide peak from above.
int64_t ledgerPeakSumBytes(const RunResult &result);

/// The host allocator's figure between the two: every rank's held peak
/// (PhaseReport::heldPeakBytes, the larger of init's and forward's: the
/// ledger's bytes plus freed blocks kept for reuse), summed over ranks. 0
/// where device memory is not host memory.
int64_t heldPeakSumBytes(const RunResult &result);

/// Bytes the local runner copies out of device memory into host tensors
/// (outputs on every rank, gathered params and kept shards): resident but,
/// by design, outside the ledger.
int64_t hostCopyBytes(const RunResult &result, int64_t worldSize);

}  // namespace shardc::runtime
