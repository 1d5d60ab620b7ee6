// The integer-value families (runtime/OpFamilies.h: comparisons, casts,
// cumsum) and int64 add/sub/mul on the CPU: torch's values for the inputs
// written here (the conversions, NaN, wrapping and accumulation types that
// differ from the naive ones), thread invariance, and the rules' errors.
#include "FamilyTestSupport.h"

#include "runtime/OpRules.h"
#include "runtime/OpTable.h"
#include "runtime/RuntimeError.h"
#include "runtime/cpu/FamilyKernels.h"

#include <catch2/catch.hpp>

#include <random>

#include <cstring>
#include <limits>

using namespace shardc::runtime;
using namespace shardc::runtime::familytest;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TT fromInts(Shape shape, const std::vector<int64_t> &values) {
  TT t = zeros(DType::I64, std::move(shape));
  std::memcpy(t.bytes.data(), values.data(), values.size() * 8);
  return t;
}

std::vector<int64_t> ints(const TT &t) {
  std::vector<int64_t> v(size_t(t.numel()));
  std::memcpy(v.data(), t.bytes.data(), v.size() * 8);
  return v;
}

std::vector<int64_t> compare(CompareOp op, const TT &a, const TT *b, double value = 0) {
  TT y = zeros(DType::I64, compareShape(op, a.shape, b ? &b->shape : nullptr));
  compareKernel(op, a.k(), b ? &static_cast<const KTensor &>(b->k()) : nullptr, value, y.k(), 2);
  return ints(y);
}

TT cast(const TT &x, DType to) {
  TT y = zeros(to, x.shape);
  castKernel(x.k(), y.k(), 2);
  return y;
}

TT cumsum(const TT &x, int64_t dim, int threads = 2, bool reverse = false) {
  TT y = zeros(x.dtype, x.shape);
  cumsumKernel({dim, reverse}, x.k(), y.k(), threads);
  return y;
}

}  // namespace

TEST_CASE("comparisons: int64 ids, torch's scalar rounding, NaN, broadcasting", "[values]") {
  using V = std::vector<int64_t>;
  const TT ids = fromInts({5}, {0, 1, 2, 3, 1});
  // RoBERTa: input_ids.ne(padding_idx)
  CHECK(compare(CompareOp::Ne, ids, nullptr, 1) == V{1, 0, 1, 1, 0});
  CHECK(compare(CompareOp::Eq, ids, nullptr, 1) == V{0, 1, 0, 0, 1});
  // int64 against a fraction: both in float32, as torch promotes
  CHECK(compare(CompareOp::Lt, ids, nullptr, 1.5) == V{1, 1, 0, 0, 1});
  CHECK(compare(CompareOp::Ge, ids, nullptr, 2) == V{0, 0, 1, 1, 0});
  // Past 2^53 an int64 compares exactly with an integral value.
  const TT big = fromInts({2}, {(int64_t(1) << 53) + 1, int64_t(1) << 53});
  CHECK(compare(CompareOp::Gt, big, nullptr, 9007199254740992.0) == V{1, 0});
  // The value is rounded to x's dtype first: 1.001 is 1.0 in bfloat16
  // (torch: torch.ones(1, dtype=torch.bfloat16) < 1.001 is False), not in float32.
  CHECK(compare(CompareOp::Lt, fromValues(DType::BF16, {1}, {1.0}), nullptr, 1.001) == V{0});
  CHECK(compare(CompareOp::Lt, fromValues(DType::F32, {1}, {1.0}), nullptr, 1.001) == V{1});
  // NaN: unequal to everything, ordered with nothing.
  const TT withNaN = fromValues(DType::F32, {3}, {kNaN, 0.5, -1});
  CHECK(compare(CompareOp::Eq, withNaN, &withNaN) == V{0, 1, 1});
  CHECK(compare(CompareOp::Ne, withNaN, &withNaN) == V{1, 0, 0});
  CHECK(compare(CompareOp::Le, withNaN, nullptr, 0.5) == V{0, 1, 1});
  CHECK(compare(CompareOp::Gt, withNaN, nullptr, -2) == V{0, 1, 1});
  // [2, 1] against [3]: [2, 3]
  const TT col = fromInts({2, 1}, {1, 5}), row = fromInts({3}, {0, 5, 9});
  CHECK(compare(CompareOp::Ge, col, &row) == V{1, 0, 0, 1, 1, 0});
  CHECK(compare(CompareOp::Lt, row, &col) == V{1, 0, 0, 1, 0, 0});
}

TEST_CASE("float32 against a value: every op on 40,000 elements as the double definition",
          "[values]") {
  // The float32 path compares in float with the op chosen once; the
  // definition compares the elements widened to double with the value
  // rounded to float32 first. Elements: the value itself and its float
  // neighbours, NaN, infinities, signed zeros and random ones, past two
  // task chunks (16384 elements).
  for (double value : {3.0, -3.0, 1.001, 0.0, std::numeric_limits<double>::infinity()}) {
    const float bound = static_cast<float>(value);
    std::vector<double> xs;
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uniform(-5, 5);
    for (int i = 0; i < 40000; ++i) {
      switch (i % 8) {
      case 0: xs.push_back(bound); break;
      case 1: xs.push_back(std::nextafter(bound, 1e30f)); break;
      case 2: xs.push_back(std::nextafter(bound, -1e30f)); break;
      case 3: xs.push_back(i % 16 == 3 ? kNaN : -0.0); break;
      case 4:
        xs.push_back(i % 16 == 4 ? std::numeric_limits<double>::infinity()
                                 : -std::numeric_limits<double>::infinity());
        break;
      default: xs.push_back(uniform(rng));
      }
    }
    const TT x = fromValues(DType::F32, {int64_t(xs.size())}, xs);
    for (CompareOp op : {CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt,
                         CompareOp::Ge}) {
      const std::vector<int64_t> got = compare(op, x, nullptr, value);
      for (size_t i = 0; i < xs.size(); ++i) {
        const double a = x.at(int64_t(i)), v = bound;
        const bool want = op == CompareOp::Eq   ? a == v
                          : op == CompareOp::Ne ? a != v
                          : op == CompareOp::Lt ? a < v
                          : op == CompareOp::Le ? a <= v
                          : op == CompareOp::Gt ? a > v
                                                : a >= v;
        INFO("value " << value << " op " << int(op) << " element " << i << " = " << a);
        REQUIRE(got[i] == int64_t(want));
      }
    }
  }
}

TEST_CASE("where: picks a or b by a nonzero condition, broadcast, exact bits", "[values]") {
  // masked_fill(scores, ~mask, -inf) on an attention mask [2, 1, 3] over scores [2, 2, 3]
  const TT cond = fromInts({2, 1, 3}, {1, 0, 1, 0, 0, 5});
  const TT a = fromValues(DType::BF16, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, kNaN});
  const TT b = fromValues(DType::BF16, {}, {-std::numeric_limits<double>::infinity()});
  TT y = zeros(DType::BF16, whereShape(cond.shape, a.shape, b.shape));
  REQUIRE(y.shape == Shape{2, 2, 3});
  whereKernel(cond.k(), a.k(), b.k(), y.k(), 2);
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> want{1, -inf, 3, 4, -inf, 6, -inf, -inf, 9, -inf, -inf, kNaN};
  for (int64_t i = 0; i < 12; ++i) {
    INFO("element " << i);
    if (std::isnan(want[i])) CHECK(std::isnan(y.at(i)));
    else CHECK(y.at(i) == want[i]);
  }
  // int64 values, and the same bytes for any thread count
  const TT big = fromInts({3, 1}, {kMax, kMin, 0});
  const TT c2 = fromInts({3, 2}, {1, 0, 0, 1, 1, 1});
  TT y2 = zeros(DType::I64, {3, 2});
  whereKernel(c2.k(), big.k(), fromInts({2}, {7, 8}).k(), y2.k(), 1);
  CHECK(ints(y2) == std::vector<int64_t>{kMax, 8, 7, kMin, 0, 0});
  const TT rc = fromInts({64, 1, 300}, std::vector<int64_t>(64 * 300, 0));
  const TT ra = random(DType::F32, {64, 7, 300}, 1), rb = random(DType::F32, {7, 1}, 2);
  TT y1 = zeros(DType::F32, {64, 7, 300}), y4 = y1;
  whereKernel(rc.k(), ra.k(), rb.k(), y1.k(), 1);
  whereKernel(rc.k(), ra.k(), rb.k(), y4.k(), 4);
  CHECK(y1.bytes == y4.bytes);
  CHECK(y1.at(5) == rb.at(0));
  // Every element against index arithmetic, with task chunks (16384
  // elements) ending inside rows of the last dim, and 0-d operands.
  std::vector<int64_t> bits(5 * 1000);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = int64_t((i * 7919) % 3 == 0);
  const TT mc = fromInts({5, 1, 1000}, bits);
  const TT ma = random(DType::F32, {7, 1}, 3), mb = random(DType::F32, {5, 7, 1000}, 4);
  TT my = zeros(DType::F32, {5, 7, 1000});
  whereKernel(mc.k(), ma.k(), mb.k(), my.k(), 2);
  for (int64_t i = 0; i < my.numel(); ++i) {
    const int64_t n = i / 7000, r = i / 1000 % 7, col = i % 1000;
    INFO("element " << i);
    REQUIRE(my.at(i) == (bits[size_t(n * 1000 + col)] ? ma.at(r) : mb.at(i)));
  }
  TT scalar = zeros(DType::F32, {});
  whereKernel(fromInts({}, {0}).k(), fromValues(DType::F32, {}, {1.5}).k(),
              fromValues(DType::F32, {}, {-2.5}).k(), scalar.k(), 1);
  CHECK(scalar.at(0) == -2.5);
}

TEST_CASE("cast: torch's truncation, rounding and NaN rules", "[values]") {
  // float to int64: toward zero; NaN and out of range give INT64_MIN
  // (torch on x86: torch.tensor([nan, 1e20]).long() is [-2^63, -2^63]).
  const TT f = fromValues(DType::F32, {6}, {-2.7, 2.7, kNaN, 1e20, -0.5, -1e20});
  CHECK(ints(cast(f, DType::I64)) == std::vector<int64_t>{-2, 2, kMin, kMin, 0, kMin});
  // int64 to float rounds to nearest even: 2^24 + 1 is 2^24 in float32,
  // 2^53 + 1 is 2^53 in float64, 257 is 256 in bfloat16.
  const TT i = fromInts({3}, {(1 << 24) + 1, 257, -3});
  const TT asF32 = cast(i, DType::F32);
  CHECK(asF32.at(0) == 16777216.0);
  CHECK(asF32.at(2) == -3.0);
  CHECK(cast(i, DType::BF16).at(1) == 256.0);
  const TT wide = fromInts({1}, {(int64_t(1) << 53) + 1});
  CHECK(cast(wide, DType::F64).at(0) == 9007199254740992.0);
  // float32 to bfloat16: ties to even (1 + 2^-8 -> 1, 1 + 3 * 2^-8 -> 1 + 2^-6).
  const TT ties = fromValues(DType::F32, {2}, {1 + std::ldexp(1.0, -8), 1 + 3 * std::ldexp(1.0, -8)});
  const TT bf = cast(ties, DType::BF16);
  CHECK(bf.at(0) == 1.0);
  CHECK(bf.at(1) == 1 + std::ldexp(1.0, -6));
  // float64 to float16 through float32, as c10 converts (a double just above
  // a float16 tie lands on the tie in float32, which then rounds to even):
  // 1 + 2^-11 + 2^-40 is 1 + 2^-10 when rounded once, 1 when rounded twice.
  const TT d = fromValues(DType::F64, {1}, {1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)});
  CHECK(cast(d, DType::F16).at(0) == 1.0);
  // The same dtype is a copy; bool as int64 casts to 1.0 / 0.0.
  CHECK(ints(cast(i, DType::I64)) == ints(i));
  CHECK(cast(fromInts({2}, {1, 0}), DType::F32).at(0) == 1.0);
  // int64 to float32 over two task chunks: each element rounded once, in place.
  std::vector<int64_t> many(40000);
  for (size_t k = 0; k < many.size(); ++k)
    many[k] = k % 4 == 0   ? kMax - int64_t(k)
              : k % 4 == 1 ? kMin + int64_t(k)
              : k % 4 == 2 ? (int64_t(1) << 24) + int64_t(k)
                           : -int64_t(k * k);
  const TT manyF32 = cast(fromInts({int64_t(many.size())}, many), DType::F32);
  for (size_t k = 0; k < many.size(); ++k) {
    INFO("element " << k << " = " << many[k]);
    REQUIRE(manyF32.at(int64_t(k)) == double(static_cast<float>(many[k])));
  }
}

TEST_CASE("cumsum: int64 wraps, float32 accumulates in double, 16-bit in float", "[values]") {
  // RoBERTa's position ids: cumsum(mask) * mask + padding_idx.
  CHECK(ints(cumsum(fromInts({2, 4}, {1, 1, 0, 0, 1, 1, 1, 1}), 1)) ==
        std::vector<int64_t>{1, 2, 2, 2, 1, 2, 3, 4});
  CHECK(ints(cumsum(fromInts({2, 2}, {kMax, 5, 1, 6}), 0)) ==
        std::vector<int64_t>{kMax, 5, kMin, 11});
  CHECK(ints(cumsum(fromInts({2, 2}, {kMax, 5, 1, 6}), -1)) ==
        std::vector<int64_t>{kMax, kMin + 4, 1, 7});
  // float32: 1 then 100 x 1e-8 in double is 1 + 1e-6, which a float
  // accumulator would never leave 1.0 for.
  std::vector<double> small(101, double(1e-8f));
  small[0] = 1;
  const TT f = cumsum(fromValues(DType::F32, {101}, small), 0);
  double want = 1;
  for (int k = 0; k < 100; ++k) want += double(1e-8f);
  CHECK(f.at(100) == double(float(want)));
  CHECK(f.at(100) > 1.0);
  // bfloat16 accumulates in float: four 2^-9 steps reach 1 + 2^-7; rounding
  // each partial sum to bfloat16 would stay at 1.
  const TT b = cumsum(fromValues(DType::BF16, {5}, {1, std::ldexp(1.0, -9), std::ldexp(1.0, -9),
                                                    std::ldexp(1.0, -9), std::ldexp(1.0, -9)}),
                      0);
  CHECK(b.at(1) == 1.0);
  CHECK(b.at(4) == 1 + std::ldexp(1.0, -7));
  // Lines are independent tasks: any thread count, the same bytes.
  const TT r = random(DType::F32, {7, 300, 13}, 3);
  for (int64_t dim : {0, 1, 2}) CHECK(cumsum(r, dim, 1).bytes == cumsum(r, dim, 4).bytes);
}

TEST_CASE("cumsum reverse: sums from the line's end, in that order", "[values]") {
  // cumsum's gradient: y[i] = x[i] + ... + x[n-1], torch's
  // x.flip(d).cumsum(d).flip(d).
  CHECK(ints(cumsum(fromInts({2, 3}, {1, 2, 3, 4, 5, 6}), 1, 2, true)) ==
        std::vector<int64_t>{6, 5, 3, 15, 11, 6});
  CHECK(ints(cumsum(fromInts({2, 3}, {1, 2, 3, 4, 5, 6}), 0, 2, true)) ==
        std::vector<int64_t>{5, 7, 9, 4, 5, 6});
  // The order is the reverse one: 100 x 1e-8 then 1 (accumulated in
  // double, so the small ones survive); the last element is its own.
  std::vector<double> small(101, double(1e-8f));
  small[100] = 1;
  const TT f = cumsum(fromValues(DType::F32, {101}, small), 0, 2, true);
  double want = 1;
  for (int k = 0; k < 100; ++k) want += double(1e-8f);
  CHECK(f.at(0) == double(float(want)));
  CHECK(f.at(100) == 1.0);
  // Reversing a reversed line's scan is the forward scan of the line.
  const TT r = random(DType::F32, {7, 30, 13}, 5);
  for (int64_t dim : {0, 1, 2}) {
    const TT back = cumsum(r, dim, 1, true);
    CHECK(back.bytes == cumsum(r, dim, 3, true).bytes);
    const Shape &s = r.shape;
    const int64_t d = dim, inner = d == 2 ? 1 : d == 1 ? s[2] : s[1] * s[2];
    // element 0 of each line holds the line's whole sum, as the forward
    // scan's last element does (the same values, other order: close).
    const TT fwd = cumsum(r, dim);
    for (int64_t line = 0; line < r.numel() / s[d]; ++line) {
      const int64_t first = (line / inner) * s[d] * inner + line % inner;
      CHECK(std::abs(back.at(first) - fwd.at(first + (s[d] - 1) * inner)) <= 1e-5);
    }
  }
}

TEST_CASE("int64 add, sub, mul wrap as torch; div refuses integers", "[values]") {
  const TT a = fromInts({3}, {kMax, 7, -3}), b = fromInts({3}, {1, 3, kMin});
  auto run = [&](BinaryOp op) {
    TT y = zeros(DType::I64, {3});
    binaryKernel(op, a.k(), b.k(), y.k(), 2);
    return ints(y);
  };
  CHECK(run(BinaryOp::Add) == std::vector<int64_t>{kMin, 10, kMax - 2});
  CHECK(run(BinaryOp::Sub) == std::vector<int64_t>{kMax - 1, 4, kMax - 2});
  CHECK(run(BinaryOp::Mul) == std::vector<int64_t>{kMax, 21, kMin});
  TT y = zeros(DType::I64, {3});
  CHECK_THROWS_WITH(binaryKernel(BinaryOp::Div, a.k(), b.k(), y.k(), 1),
                    Catch::Contains("div: int64 operands are not supported"));
}

TEST_CASE("value families: the rules' errors", "[values]") {
  using shardc::plan::OpCode;
  using shardc::plan::opInfo;
  const TensorType ids{{2, 3}, DType::I64}, f{{2, 3}, DType::F32}, row{{4}, DType::I64};
  auto reason = [](OpCode op, std::vector<TensorType> in, AttrMap attrs) {
    TensorType out;
    return tryResultType(opInfo(op), in, attrs, out).value_or("");
  };
  CHECK(reason(OpCode::Ne, {ids}, {}) == "ne: compares one operand with `value`, which is missing");
  CHECK(reason(OpCode::Ne, {ids, ids}, {{"value", 1.0}}) ==
        "ne: compares two operands; `value` is for the one-operand form");
  CHECK(reason(OpCode::Eq, {ids, f}, {}) == "eq: operands differ in dtype: int64 and float32");
  CHECK(reason(OpCode::Lt, {ids, row}, {}) == "lt: shapes [2, 3] and [4] do not broadcast");
  CHECK(reason(OpCode::Where, {f, f, f}, {}) ==
        "where: cond (operand 0) is float32; expects int64 (a comparison's 1/0)");
  CHECK(reason(OpCode::Where, {ids, f, ids}, {}) ==
        "where: operands differ in dtype: float32 and int64");
  CHECK(reason(OpCode::Where, {ids, f, TensorType{{4}, DType::F32}}, {}) ==
        "where: shapes [2, 3], [2, 3] and [4] do not broadcast");
  CHECK(reason(OpCode::Cast, {f}, {{"dtype", std::string("int32")}}) ==
        "cast: dtype must be float32, float64, bfloat16, float16 or int64, got \"int32\"");
  CHECK(reason(OpCode::Cumsum, {f}, {{"dim", int64_t{2}}}) ==
        "cumsum: Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  TensorType out;
  REQUIRE_FALSE(tryResultType(opInfo(OpCode::Ne), std::vector<TensorType>{f},
                              AttrMap{{"value", 0.0}}, out));
  CHECK(out == TensorType{{2, 3}, DType::I64});
  REQUIRE_FALSE(tryResultType(opInfo(OpCode::Cast), std::vector<TensorType>{ids},
                              AttrMap{{"dtype", std::string("bfloat16")}}, out));
  CHECK(out == TensorType{{2, 3}, DType::BF16});
  // A kernel handed a wrong output fails before it writes.
  TT x = fromInts({2, 3}, {1, 2, 3, 4, 5, 6}), wrong = zeros(DType::F32, {2, 3});
  CHECK_THROWS_WITH(compareKernel(CompareOp::Eq, x.k(), nullptr, 1, wrong.k(), 1),
                    Catch::Contains("eq:"));
}
