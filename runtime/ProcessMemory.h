// The operating system's view of this process's memory (Linux /proc), next
// to the runtime's exact accounting: code, the compiler's leftovers, thread
// stacks and allocator slack are all in it.
#pragma once

#include <cstdint>

namespace shardc::runtime {

/// Resident set size now (VmRSS), in bytes; -1 when /proc is unreadable.
int64_t residentBytes();

/// Peak resident set size (VmHWM) since the process started or since the
/// last successful resetPeakResident(), in bytes; -1 when unreadable.
int64_t peakResidentBytes();

/// Restarts the peak at the current RSS (writes "5" to
/// /proc/self/clear_refs, Linux 4.0+). False when the kernel refused: the
/// peak then still counts from the process's start.
bool resetPeakResident();

}  // namespace shardc::runtime
