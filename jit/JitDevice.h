// Where a CompiledModel's ranks run (JitOptions::device): the one place the
// JIT API knows about devices, so that the CUDA runtime stays optional.
#pragma once

#include "runtime/SessionRank.h"

#include <string>

namespace shardc::detail {

/// Checks `device` ("cpu", "cuda" or "cuda:N") when a model is compiled;
/// throws shardc::Error naming the device and why it cannot run there (not
/// built with CUDA, no device visible, no such ordinal).
void checkDevice(const std::string &device);

/// The ranks of a session on `device` (checked by checkDevice): empty (the
/// session's CPU default) for "cpu", ranks sharing one GPU for "cuda[:N]".
runtime::SessionRankFactory sessionRanks(const std::string &device);

}  // namespace shardc::detail
