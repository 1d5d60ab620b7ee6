// A failure that every rank reports alike although it happened on one rank.
#pragma once

#include "runtime/RuntimeError.h"

#include <cstdint>
#include <string>

namespace shardc::runtime {

/// A collective step failed on rank `rank()` (a cooperative save whose file
/// rank 0 could not create) and every rank throws this: runners name
/// `rank()` in the message, not the rank that happened to report it.
class RankError : public RuntimeError {
public:
  RankError(int64_t rank, const std::string &message) : RuntimeError(message), rank_(rank) {}
  int64_t rank() const { return rank_; }

private:
  int64_t rank_;
};

}  // namespace shardc::runtime
