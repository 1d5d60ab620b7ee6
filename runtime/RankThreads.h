// Ranks as threads of this process: the one way runLocal and LocalSession
// start them (CPU ranks or ranks sharing a GPU), collect the first failure
// and make sure no rank is left waiting in a collective for a peer that
// failed or never started.
#pragma once

#include "runtime/LocalCommunicator.h"

#include <cstdint>
#include <functional>

namespace shardc::runtime {

/// Runs body(r) for every r in [0, n), one thread each; the threads are the
/// ranks of `group`. The first failure, a RankError (which names its rank)
/// or any other exception (named "rank rankName(r)", default r), aborts the
/// group, so the other ranks' collectives return instead of waiting, and is
/// rethrown as RuntimeError("rank R: reason") once every thread has joined.
/// A thread the OS refuses fails the run with a message saying how many
/// ranks started and what to do; that message wins over what the started
/// ranks then report (the abort, or the same shortage of memory).
void runRankThreads(LocalGroup &group, int64_t n, const std::function<void(int64_t)> &body,
                    const std::function<int64_t(int64_t)> &rankName = {});

/// Why a local run stopped at rank `started` of `n`: the OS refused a thread.
std::string threadStartFailure(int64_t started, int64_t n, const std::string &reason);

}  // namespace shardc::runtime
