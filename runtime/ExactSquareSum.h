// The exact sum of squares behind gradient clipping's global norm
// (grad_norm, docs/training.md "Gradient clipping").
//
// A norm over shards is a sum over ranks, and floating-point addition
// depends on its order: summed in double per rank and then over ranks, the
// norm of the same gradients would differ in its last bits between world
// sizes, and so would every clipped update after it. This accumulator adds
// every square exactly, as a fixed-point integer wide enough for any square
// of a double, so the sum does not depend on the order, the partition over
// threads or the partition over ranks; value() rounds it once.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace shardc::runtime {

class Communicator;

class ExactSquareSum {
public:
  /// Bits of one limb's digit; limbs are uint64 so that 2^31 additions of a
  /// digit fit before the carries must be propagated.
  static constexpr int kDigitBits = 32;
  /// The weight of limb 0's lowest bit: below the smallest square of a
  /// double (2^-2148).
  static constexpr int kLowestExponent = -2176;
  /// Limbs up to 2^2176: 2^128 times the largest square of a double (below
  /// 2^2048), room for more squares than any tensor has.
  static constexpr int kLimbs = 136;
  /// Words of wire(): the limbs, then the non-finite flags.
  static constexpr int kWireWords = kLimbs + 1;

  ExactSquareSum();

  /// Adds the squares of float32 values (bfloat16 and float16 widen to
  /// float32 exactly), and of float64 values.
  void addFloats(const float *values, int64_t n);
  void addDoubles(const double *values, int64_t n);
  /// Adds another sum: integer addition, so any order gives the same sum.
  void merge(const ExactSquareSum &other);

  /// The sum as kWireWords words, for a collective; merged again with
  /// mergeWire.
  std::vector<uint64_t> wire() const;
  void mergeWire(const uint64_t *words);

  /// The sum rounded to the nearest double (ties to even); +inf when it
  /// overflows or a value was infinite, NaN when a value was NaN.
  double value() const;

private:
  /// Adds `magnitude` * 2^exponent (exponent >= kLowestExponent).
  void addAt(unsigned __int128 magnitude, int exponent);
  void foldFloatBuckets();
  void propagateCarries();

  /// float32 squares by the value's biased exponent: the square of the
  /// 24-bit significand m (m^2 < 2^48), at 2^(2 * (exponent - 150)); a sum
  /// of 2^80 of them still fits, so they are folded into the limbs only
  /// when the sum is read.
  std::array<unsigned __int128, 256> floatBuckets_{};
  std::array<uint64_t, kLimbs> limbs_{};
  int64_t additionsSinceCarry_ = 0;
  bool sawInfinity_ = false;
  bool sawNan_ = false;
};

/// sqrt of the exact sum over every rank's `local` sum (one allGather of
/// their wire words; every rank gets the same bits whatever the world
/// size): the global L2 norm of tensors whose elements the ranks hold
/// between them.
double globalNorm(Communicator &comm, const ExactSquareSum &local);

}  // namespace shardc::runtime
