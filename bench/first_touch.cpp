// What first-touching fresh memory costs on this machine, counted with
// figures that do not depend on the machine's load: the process's user and
// sys CPU time and minor faults (getrusage), its huge pages (AnonHugePages in
// /proc/self/smaps_rollup), and the kernel's THP and compaction counters
// (/proc/vmstat deltas; system-wide, so other processes may add to them).
//
// Why: one rank's init (docs/init-scale.md) spent about 7x more sys time
// than its user time, faulting in its shards. This separates the parts:
// the guest kernel's fault and page clear (4 KiB vs 2 MiB pages,
// MAP_POPULATE, several threads), the touch of memory the hypervisor has
// taken back (free page reporting: freed blocks of 2 MiB and more are
// handed to the host, and the next touch of them faults in the host too),
// and a second write of memory already touched (the pure store bandwidth).
//
// Usage: first_touch [GiB (default 4.1)] [threads for the threaded rows
// (default 2)] [seconds to wait for free page reporting (default 5)]
// Each row maps its own region, writes every byte once, and unmaps it.
#include "runtime/HostMemory.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Counters {
  double wall = 0, user = 0, sys = 0;
  double steal = 0;        // both vCPUs' steal time (/proc/stat): the host ran something else
  double runqueueWait = 0; // this process's time waiting for a CPU (/proc/self/schedstat)
  long minorFaults = 0, majorFaults = 0;
  std::map<std::string, long> vmstat;
};

double seconds(const timeval &t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; }

std::map<std::string, long> readVmstat() {
  std::map<std::string, long> values;
  std::ifstream in("/proc/vmstat");
  std::string name;
  long value = 0;
  while (in >> name >> value)
    if (name.rfind("thp_fault", 0) == 0 || name.rfind("compact_", 0) == 0 ||
        name == "pgfault" || name.rfind("pgsteal", 0) == 0 || name.rfind("allocstall", 0) == 0)
      values[name] = value;
  return values;
}

double stealSeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  long user, nice, system, idle, iowait, irq, softirq, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  return double(steal) / 100.0;  // USER_HZ
}

double runqueueWaitSeconds() {
  // Summed over this process's threads would need /proc/self/task/*; the
  // rows that use threads join them before reading, and a thread's wait is
  // folded into the process's schedstat only through its own file, so this
  // reads the main thread's (the single-threaded rows are the ones compared).
  std::ifstream in("/proc/self/schedstat");
  double run = 0, wait = 0;
  in >> run >> wait;
  return wait * 1e-9;
}

/// KiB handed back to the hypervisor so far by free page reporting, where
/// the kernel exports the figure (this VM's kernel does; upstream does not):
/// -1 if not.
long reportedKiB() {
  std::ifstream in("/sys/module/page_reporting/parameters/reported_kib");
  long value = -1;
  in >> value;
  return in ? value : -1;
}

Counters now() {
  Counters c;
  c.steal = stealSeconds();
  c.runqueueWait = runqueueWaitSeconds();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  c.user = seconds(usage.ru_utime);
  c.sys = seconds(usage.ru_stime);
  c.minorFaults = usage.ru_minflt;
  c.majorFaults = usage.ru_majflt;
  c.wall = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  c.vmstat = readVmstat();
  return c;
}

long anonHugeKiB() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("AnonHugePages:", 0) == 0) return std::atol(line.c_str() + 14);
  return -1;
}

void touch(char *data, size_t bytes, int threads) {
  if (threads <= 1) {
    std::memset(data, 1, bytes);
    return;
  }
  std::vector<std::thread> workers;
  size_t chunk = (bytes / threads + 4095) / 4096 * 4096;
  for (int t = 0; t < threads; ++t) {
    size_t begin = std::min(bytes, chunk * size_t(t));
    size_t end = std::min(bytes, begin + chunk);
    workers.emplace_back([=] { std::memset(data + begin, 1, end - begin); });
  }
  for (auto &w : workers) w.join();
}

struct Variant {
  std::string name;
  bool huge = false;       // MADV_HUGEPAGE (else MADV_NOHUGEPAGE)
  bool populate = false;   // MAP_POPULATE, then the write
  int threads = 1;
  bool secondWrite = false;  // time a second write of already-touched memory
  bool recycled = false;     // reuse pages just freed (before reporting)
  bool populateWrite = false;  // MADV_POPULATE_WRITE instead of MAP_POPULATE (4 KiB rows)
  bool hostMemory = false;     // shardc's HostMemory with the system's page policy
};

void row(const Variant &v, size_t bytes, int waitSeconds) {
  if (!v.recycled) {
    long reportedBefore = reportedKiB();
    std::this_thread::sleep_for(std::chrono::seconds(waitSeconds));
    if (reportedBefore >= 0)
      std::printf("  (waited %d s: %ld MiB of free memory reported to the hypervisor)\n",
                  waitSeconds, (reportedKiB() - reportedBefore) / 1024);
  }
  Counters before = now();
  if (v.hostMemory) {
    shardc::runtime::HostMemory memory;
    shardc::runtime::HostMemory::Block block = memory.allocate(bytes, 64);
    if (!block.data) return;
    touch(static_cast<char *>(block.data), bytes, v.threads);
    Counters after = now();
    std::printf("%-34s wall %6.3f s  user %6.3f  sys %6.3f  %5.2f GB/s(wall)  minflt %8ld  "
                "AnonHuge %7ld MiB  (%s)\n",
                v.name.c_str(), after.wall - before.wall, after.user - before.user,
                after.sys - before.sys, double(bytes) / 1e9 / (after.wall - before.wall),
                after.minorFaults - before.minorFaults, anonHugeKiB() / 1024,
                shardc::runtime::systemPagePolicy().reason.c_str());
    memory.release(block);
    return;
  }
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | (v.populate && !v.huge && !v.populateWrite ? MAP_POPULATE : 0);
  char *data = static_cast<char *>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0));
  if (data == MAP_FAILED) {
    std::printf("%-34s mmap failed\n", v.name.c_str());
    return;
  }
  madvise(data, bytes, v.huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#ifdef MADV_POPULATE_WRITE
  if (v.populate && (v.huge || v.populateWrite)) madvise(data, bytes, MADV_POPULATE_WRITE);
#endif
  if (v.secondWrite) {
    touch(data, bytes, v.threads);
    before = now();
  }
  touch(data, bytes, v.threads);
  Counters after = now();
  long huge = anonHugeKiB();
  munmap(data, bytes);
  double gb = double(bytes) / 1e9;
  auto delta = [&](const char *name) { return after.vmstat[name] - before.vmstat[name]; };
  std::printf("%-34s wall %6.3f s  user %6.3f  sys %6.3f  %5.2f GB/s(wall)  minflt %8ld  "
              "sys us/fault %6.2f  AnonHuge %7ld MiB  thp_alloc %5ld fallback %4ld "
              "compact_stall %3ld allocstall %ld  steal %5.2f  rq-wait %5.2f\n",
              v.name.c_str(), after.wall - before.wall, after.user - before.user,
              after.sys - before.sys, gb / (after.wall - before.wall),
              after.minorFaults - before.minorFaults,
              (after.minorFaults - before.minorFaults) > 0
                  ? (after.sys - before.sys) * 1e6 / double(after.minorFaults - before.minorFaults)
                  : 0.0,
              huge / 1024, delta("thp_fault_alloc"), delta("thp_fault_fallback"),
              delta("compact_stall"),
              delta("allocstall_normal") + delta("allocstall_movable") + delta("allocstall_dma32"),
              after.steal - before.steal, after.runqueueWait - before.runqueueWait);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
  double gib = argc > 1 ? std::atof(argv[1]) : 4.1;
  int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  int wait = argc > 3 ? std::atoi(argv[3]) : 5;
  size_t bytes = size_t(gib * double(size_t(1) << 30)) / 4096 * 4096;
  std::printf("first_touch: %.2f GiB per row, %d threads in threaded rows, %d s between rows\n",
              double(bytes) / double(size_t(1) << 30), threads, wait);
  std::string t = std::to_string(threads);
  std::vector<Variant> variants = {
      {"4K write (fresh)", false, false, 1, false, false},
      {"4K write (recycled: just freed)", false, false, 1, false, true},
      {"4K second write (touched)", false, false, 1, true, true},
      {"2M MADV_HUGEPAGE write (fresh)", true, false, 1, false, false},
      {"2M MADV_HUGEPAGE write (recycled)", true, false, 1, false, true},
      {"4K MAP_POPULATE + write (fresh)", false, true, 1, false, false},
      {"2M POPULATE_WRITE + write (fresh)", true, true, 1, false, false},
      {"4K POPULATE_WRITE + write (fresh)", false, true, 1, false, false, true},
      {"4K write " + t + " threads (fresh)", false, false, threads, false, false},
      {"2M write " + t + " threads (fresh)", true, false, threads, false, false},
      {"shardc HostMemory + write (fresh)", false, false, 1, false, false, false, true},
  };
  for (const Variant &v : variants) row(v, bytes, wait);
}
