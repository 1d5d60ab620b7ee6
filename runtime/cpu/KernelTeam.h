// The threads behind parallelTasks (KernelSupport.h): one team per calling
// thread (a rank's thread, the JIT's caller), started at its first parallel
// kernel and kept until that thread ends.
//
// Why not a thread per call: a forward runs hundreds of kernels, and starting
// and joining a thread costs tens of microseconds, as much as a small
// kernel's whole work. At --threads 2 a small transformer spent more time
// starting threads than it saved (bench/README.md, "Kernel threads"). The
// team's workers spin briefly between kernels, then sleep in futex waits
// (init::RoundTeam), so an idle rank gives its cores away.
//
// Tasks are handed out in chunks from a shared counter, so a worker that the
// OS runs late (ranks oversubscribing the cores) does not hold up the
// others. Which thread runs a task never changes a result: the kernels
// write each task's outputs from its inputs alone.
#pragma once

#include <cstdint>

namespace shardc::runtime::cpu {

/// Runs tasks [begin, end) of one call: fn(context, begin, end).
using TaskRange = void (*)(const void *context, int64_t begin, int64_t end);

/// Runs all `tasks` tasks of `fn` on up to `threads` threads of the calling
/// thread's team (the caller included), and returns when they are done.
/// The team grows when a call asks for more threads than it has; a call
/// asking for fewer uses part of it.
/// - A call made from inside a task (a kernel calling a kernel) runs its
///   tasks serially on that thread: the team is busy, and a team per worker
///   would multiply the threads.
/// - Threads the OS refuses shrink the team (same results, slower).
/// - An exception from a task is rethrown here after every started task has
///   finished: the one from the lowest-numbered failing chunk.
void runOnKernelTeam(int64_t tasks, int threads, TaskRange fn, const void *context);

/// Workers the calling thread's team has now (0 before its first parallel
/// kernel). For tests.
int kernelTeamWorkers();

}  // namespace shardc::runtime::cpu
