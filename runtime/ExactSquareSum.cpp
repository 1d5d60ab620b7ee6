#include "runtime/ExactSquareSum.h"

#include "runtime/Communicator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace shardc::runtime {
namespace {

constexpr uint64_t kDigitMask = (uint64_t{1} << ExactSquareSum::kDigitBits) - 1;
/// Carries are propagated before any limb could exceed 2^63.
constexpr int64_t kAdditionsPerCarry = int64_t{1} << 30;

/// Where float32 bucket `b` (a biased exponent) puts its squares: a
/// float32 of biased exponent b is m * 2^(b - 150) (subnormals: b = 0 reads
/// as 1, without the implicit bit).
int floatBucketExponent(int bucket) { return 2 * ((bucket == 0 ? 1 : bucket) - 150); }

}  // namespace

ExactSquareSum::ExactSquareSum() = default;

void ExactSquareSum::addAt(unsigned __int128 magnitude, int exponent) {
  if (magnitude == 0) return;
  const int position = exponent - kLowestExponent;
  int limb = position / kDigitBits;
  const int shift = position % kDigitBits;
  // The first limb takes the low (32 - shift) bits, shifted into place;
  // every later one a whole digit. No limb gains 2^32 or more.
  limbs_[limb] += static_cast<uint64_t>(magnitude & ((uint64_t{1} << (kDigitBits - shift)) - 1))
                  << shift;
  magnitude >>= (kDigitBits - shift);
  while (magnitude != 0 && ++limb < kLimbs) {
    limbs_[limb] += static_cast<uint64_t>(magnitude) & kDigitMask;
    magnitude >>= kDigitBits;
  }
  if (++additionsSinceCarry_ >= kAdditionsPerCarry) propagateCarries();
}

void ExactSquareSum::propagateCarries() {
  for (int i = 0; i + 1 < kLimbs; ++i) {
    limbs_[i + 1] += limbs_[i] >> kDigitBits;
    limbs_[i] &= kDigitMask;
  }
  additionsSinceCarry_ = 0;
}

void ExactSquareSum::addFloats(const float *values, int64_t n) {
  // A square of a 24-bit significand is below 2^48, so a 64-bit bucket
  // takes 2^16 of them: chunks of 2^16 values (two lanes of 2^15) add in
  // 64 bits, one add per value, then fold into the 128-bit buckets.
  constexpr int64_t kChunk = int64_t{1} << 16;
  bool nonFinite = false;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t end = std::min(n, begin + kChunk);
    // Two bucket arrays, even and odd values: neighbours mostly share an
    // exponent, and one array would chain their additions through memory.
    std::array<std::array<uint64_t, 256>, 2> chunk{};
    auto add = [&](int lane, float value) {
      const uint32_t bits = std::bit_cast<uint32_t>(value);
      const uint32_t exponent = (bits >> 23) & 0xff;
      const uint64_t significand = (bits & 0x7fffff) | (exponent == 0 ? 0 : 0x800000);
      chunk[lane][exponent] += significand * significand;
    };
    int64_t i = begin;
    for (; i + 1 < end; i += 2) {
      add(0, values[i]);
      add(1, values[i + 1]);
    }
    if (i < end) add(0, values[i]);
    // An infinity adds 2^46 to bucket 255, a NaN more.
    nonFinite |= chunk[0][255] != 0 || chunk[1][255] != 0;
    for (int b = 0; b < 255; ++b)
      floatBuckets_[b] += static_cast<unsigned __int128>(chunk[0][b]) + chunk[1][b];
  }
  // Bucket 255 held infinities and NaNs; which were there is decided by a
  // second look, only when there were any.
  if (nonFinite)
    for (int64_t k = 0; k < n; ++k) {
      if (std::isnan(values[k]))
        sawNan_ = true;
      else if (std::isinf(values[k]))
        sawInfinity_ = true;
    }
}

void ExactSquareSum::addDoubles(const double *values, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = std::bit_cast<uint64_t>(values[i]);
    const int exponent = static_cast<int>((bits >> 52) & 0x7ff);
    const uint64_t fraction = bits & ((uint64_t{1} << 52) - 1);
    if (exponent == 0x7ff) {
      (fraction ? sawNan_ : sawInfinity_) = true;
      continue;
    }
    // m * 2^(e - 1075); m^2 < 2^106 is exact in 128 bits.
    const uint64_t significand = fraction | (exponent == 0 ? 0 : uint64_t{1} << 52);
    const unsigned __int128 square = static_cast<unsigned __int128>(significand) * significand;
    addAt(square, 2 * ((exponent == 0 ? 1 : exponent) - 1075));
  }
}

void ExactSquareSum::foldFloatBuckets() {
  for (int b = 0; b < 256; ++b) {
    addAt(floatBuckets_[b], floatBucketExponent(b));
    floatBuckets_[b] = 0;
  }
}

void ExactSquareSum::merge(const ExactSquareSum &other) { mergeWire(other.wire().data()); }

std::vector<uint64_t> ExactSquareSum::wire() const {
  ExactSquareSum folded = *this;
  folded.foldFloatBuckets();
  folded.propagateCarries();
  std::vector<uint64_t> words(folded.limbs_.begin(), folded.limbs_.end());
  words.push_back((folded.sawInfinity_ ? 1u : 0u) | (folded.sawNan_ ? 2u : 0u));
  return words;
}

void ExactSquareSum::mergeWire(const uint64_t *words) {
  // Every wire limb is a digit (below 2^32), the top one aside: it is
  // below 2^32 too unless the sum is far past any double, where value()
  // is +inf either way.
  for (int i = 0; i < kLimbs; ++i) limbs_[i] += words[i];
  sawInfinity_ = sawInfinity_ || (words[kLimbs] & 1);
  sawNan_ = sawNan_ || (words[kLimbs] & 2);
  propagateCarries();  // each limb gained less than 2^32: digits again
}

double ExactSquareSum::value() const {
  if (sawNan_) return std::numeric_limits<double>::quiet_NaN();
  if (sawInfinity_) return std::numeric_limits<double>::infinity();
  ExactSquareSum folded = *this;
  folded.foldFloatBuckets();
  folded.propagateCarries();
  const auto &limbs = folded.limbs_;
  int top = kLimbs - 1;
  while (top >= 0 && limbs[top] == 0) --top;
  if (top < 0) return 0.0;
  if (limbs[top] > kDigitMask) return std::numeric_limits<double>::infinity();
  // The top 64 significant bits, and whether any bit below them is set
  // (sticky): converting those 64 bits with the sticky bit or-ed into the
  // lowest rounds as the whole number would (64 > 53 + 2 bits).
  auto limbAt = [&](int i) -> unsigned __int128 { return i >= 0 ? limbs[i] : 0; };
  const unsigned __int128 window = (limbAt(top) << 64) | (limbAt(top - 1) << 32) | limbAt(top - 2);
  const int windowBits = 128 - std::countl_zero(static_cast<uint64_t>(window >> 64));
  const int dropped = windowBits - 64;  // bits of the window below the 64 kept, >= 1 here
  uint64_t kept = static_cast<uint64_t>(window >> dropped);
  bool sticky = (window & ((static_cast<unsigned __int128>(1) << dropped) - 1)) != 0;
  for (int i = top - 3; i >= 0 && !sticky; --i) sticky = limbs[i] != 0;
  if (sticky) kept |= 1;
  const int exponent = kLowestExponent + (top - 2) * kDigitBits + dropped;
  return std::ldexp(static_cast<double>(kept), exponent);
}

double globalNorm(Communicator &comm, const ExactSquareSum &local) {
  const std::vector<uint64_t> mine = local.wire();
  const size_t bytes = mine.size() * sizeof(uint64_t);
  std::vector<uint64_t> all(mine.size() * static_cast<size_t>(comm.worldSize()));
  comm.allGather(mine.data(), bytes, all.data());
  ExactSquareSum sum;
  for (int64_t r = 0; r < comm.worldSize(); ++r)
    sum.mergeWire(all.data() + r * static_cast<int64_t>(mine.size()));
  return std::sqrt(sum.value());
}

}  // namespace shardc::runtime
