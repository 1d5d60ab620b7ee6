// The forward kernels against plain double-precision reference loops, on
// small awkward shapes, float32 and bfloat16 storage.
#include "runtime/ForwardKernels.h"
#include "FamilyTestSupport.h"
#include "runtime/HalfFloat.h"
#include "runtime/Kernels.h"
#include "runtime/RuntimeError.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

using namespace shardc::runtime;
using shardc::plan::DType;

namespace {

// Test tensors (storage + exact double values), zeros and random: shared
// with the family kernels' tests.
using familytest::TT;
using familytest::random;
using familytest::zeros;

double tolerance(DType dtype) { return dtype == DType::F32 ? 2e-5 : 2e-2; }

void checkClose(const TT &got, const std::vector<double> &want, double tol) {
  REQUIRE(int64_t(want.size()) == got.numel());
  for (int64_t i = 0; i < got.numel(); ++i) {
    INFO("element " << i << " got " << got.at(i) << " want " << want[i]);
    REQUIRE(std::abs(got.at(i) - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

/// Every element equals `want` rounded to got's dtype (as TT::set rounds):
/// for results that are one correctly rounded operation away from the inputs.
void checkRoundedExactly(const TT &got, const std::vector<double> &want) {
  REQUIRE(int64_t(want.size()) == got.numel());
  TT expected = zeros(got.dtype, got.shape);
  const size_t size = size_t(shardc::plan::dtypeSize(got.dtype));
  for (int64_t i = 0; i < got.numel(); ++i) {
    expected.set(i, want[i]);
    INFO("element " << i << " got " << got.at(i) << " want " << expected.at(i));
    REQUIRE(std::memcmp(got.bytes.data() + i * size, expected.bytes.data() + i * size, size) == 0);
  }
}

/// Flat index into `shape` (right-aligned broadcast) for an index of `out`.
int64_t broadcastIndex(const Shape &shape, const Shape &out, int64_t flat) {
  int64_t index = 0, stride = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    const size_t od = out.size() - 1 - i;
    const int64_t coord = flat % out[od];
    flat /= out[od];
    if (i < shape.size()) {
      const size_t d = shape.size() - 1 - i;
      if (shape[d] != 1) index += coord * stride;
      stride *= shape[d];
    }
  }
  return index;
}

const DType kFloatTypes[] = {DType::F32, DType::BF16};

}  // namespace

TEST_CASE("linear matches x w^T + b", "[forward]") {
  for (DType dtype : kFloatTypes)
    for (auto [lead, K, N] : {std::tuple<Shape, int64_t, int64_t>{{3}, 5, 7},
                              {{2, 67}, 300, 261},
                              {{1}, 1, 1},
                              {{4}, 0, 3}})
      for (bool withBias : {false, true}) {
        INFO(shardc::plan::dtypeName(dtype) << " K=" << K << " N=" << N << " bias=" << withBias);
        Shape xs = lead;
        xs.push_back(K);
        TT x = random(dtype, xs, 1), w = random(dtype, {N, K}, 2), b = random(dtype, {N}, 3);
        Shape ys = lead;
        ys.push_back(N);
        TT y = zeros(dtype, ys);
        KTensor bk = b.k();
        linearKernel(x.k(), w.k(), withBias ? &bk : nullptr, y.k(), 3);
        const int64_t M = y.numel() / N;
        std::vector<double> want(size_t(M * N));
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double s = withBias ? b.at(n) : 0;
            for (int64_t k = 0; k < K; ++k) s += x.at(m * K + k) * w.at(n * K + k);
            want[m * N + n] = s;
          }
        checkClose(y, want, tolerance(dtype) * (dtype == DType::F32 ? 1 : 2));
      }
  TT x = random(DType::F32, {2, 3}, 1), w = random(DType::F32, {4, 5}, 2), y = zeros(DType::F32, {2, 4});
  CHECK_THROWS_WITH(linearKernel(x.k(), w.k(), nullptr, y.k(), 1), Catch::Contains("disagree on K"));
}

TEST_CASE("linear results do not depend on the thread count", "[forward]") {
  TT x = random(DType::F32, {130, 70}, 5), w = random(DType::F32, {300, 70}, 6);
  TT y1 = zeros(DType::F32, {130, 300}), y4 = zeros(DType::F32, {130, 300});
  linearKernel(x.k(), w.k(), nullptr, y1.k(), 1);
  linearKernel(x.k(), w.k(), nullptr, y4.k(), 4);
  CHECK(y1.bytes == y4.bytes);
}

TEST_CASE("matmul broadcasts batch dims", "[forward]") {
  for (DType dtype : kFloatTypes)
    for (auto [as, bs, cs] : {std::tuple<Shape, Shape, Shape>{{3, 5}, {5, 2}, {3, 5 - 3}},
                              {{2, 1, 3, 4}, {3, 4, 70}, {2, 3, 3, 70}},
                              {{7, 300}, {2, 300, 9}, {2, 7, 9}}}) {
      INFO(shardc::plan::dtypeName(dtype) << " " << shapeToString(as) << " @ " << shapeToString(bs));
      TT a = random(dtype, as, 7), b = random(dtype, bs, 8), c = zeros(dtype, cs);
      matmulKernel(a.k(), b.k(), c.k(), {}, 2);
      const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
      const Shape batch(cs.begin(), cs.end() - 2);
      const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
      std::vector<double> want(size_t(c.numel()));
      for (int64_t bi = 0; bi < shardc::plan::numElements(batch); ++bi) {
        const int64_t ai = broadcastIndex(ab, batch, bi), bj = broadcastIndex(bb, batch, bi);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k)
              s += a.at(ai * M * K + m * K + k) * b.at(bj * K * N + k * N + n);
            want[bi * M * N + m * N + n] = s;
          }
      }
      checkClose(c, want, tolerance(dtype) * 2);
    }
}

/// x with its last two dims swapped, copied (a transpose's strided copy).
TT swapLastTwo(const TT &x) {
  Shape shape = x.shape;
  const size_t r = shape.size();
  std::swap(shape[r - 2], shape[r - 1]);
  TT y = zeros(x.dtype, shape);
  const int64_t rows = x.shape[r - 2], cols = x.shape[r - 1],
                size = shardc::plan::dtypeSize(x.dtype);
  for (int64_t m = 0; m < x.numel() / std::max<int64_t>(rows * cols, 1); ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        std::memcpy(&y.bytes[size_t(((m * cols + j) * rows + i) * size)],
                    &x.bytes[size_t(((m * rows + i) * cols + j) * size)], size_t(size));
  return y;
}

TEST_CASE("matmul reads transposed operands in place with the bytes of their copies", "[forward]") {
  // transpose_a / transpose_b (a transpose the lowering left out): the
  // same chains as the copied operand, so the same bytes, batched,
  // broadcast, and with a 2-d b shared by every batch.
  for (DType dtype : {DType::F32, DType::BF16})
    for (auto [as, bs] : {std::pair<Shape, Shape>{{37, 300}, {300, 70}},
                          {{2, 1, 3, 40}, {3, 40, 70}},
                          {{2, 7, 300}, {300, 9}},
                          {{7, 300}, {2, 300, 9}}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          INFO(shardc::plan::dtypeName(dtype) << " " << shapeToString(as) << " @ "
                                              << shapeToString(bs) << " ta " << ta << " tb " << tb);
          TT a = random(dtype, as, 3), b = random(dtype, bs, 4);
          Shape cs =
              *broadcastShapes(Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2));
          cs.push_back(as[as.size() - 2]);
          cs.push_back(bs.back());
          TT want = zeros(dtype, cs), got = zeros(dtype, cs);
          matmulKernel(a.k(), b.k(), want.k(), {}, 2);
          TT at = swapLastTwo(a), bt = swapLastTwo(b);
          matmulKernel((ta ? at : a).k(), (tb ? bt : b).k(), got.k(), {ta, tb}, 2);
          CHECK(got.bytes == want.bytes);
        }
  TT a = random(DType::F32, {5, 3}, 1), b = random(DType::F32, {5, 4}, 2),
     c = zeros(DType::F32, {3, 4});
  CHECK_NOTHROW(matmulKernel(a.k(), b.k(), c.k(), {true, false}, 1));
  CHECK_THROWS_WITH(matmulKernel(a.k(), b.k(), c.k(), {false, false}, 1),
                    Catch::Equals("matmul: a [5, 3] and b [5, 4] disagree on K"));
  CHECK_THROWS_WITH(
      matmulKernel(a.k(), b.k(), c.k(), {true, true}, 1),
      Catch::Equals("matmul: a (transposed) [5, 3] and b (transposed) [5, 4] disagree on K"));
}

TEST_CASE("binary elementwise ops broadcast", "[forward]") {
  for (DType dtype : {DType::F32, DType::F64, DType::BF16})
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div})
      for (auto [as, bs] : {std::pair<Shape, Shape>{{3, 1, 5}, {4, 1}},
                            {{2, 3}, {2, 3}},
                            {{}, {4, 3}},
                            {{300, 70}, {70}},
                            {{5, 1}, {1, 7}},
                            {{70}, {30, 70}},
                            {{2, 3, 1}, {3, 1}}}) {
        INFO(shardc::plan::dtypeName(dtype) << " " << binaryOpName(op) << " "
                                            << shapeToString(as) << " " << shapeToString(bs));
        TT a = random(dtype, as, 9), b = random(dtype, bs, 10, 0.5, 2);
        const Shape os = *broadcastShapes(as, bs);
        TT out = zeros(dtype, os);
        binaryKernel(op, a.k(), b.k(), out.k(), 3);
        std::vector<double> want(size_t(out.numel()));
        for (int64_t i = 0; i < out.numel(); ++i) {
          const double x = a.at(broadcastIndex(as, os, i)), y = b.at(broadcastIndex(bs, os, i));
          want[i] = op == BinaryOp::Add ? x + y : op == BinaryOp::Sub ? x - y
                  : op == BinaryOp::Mul ? x * y : x / y;
        }
        // One IEEE operation, rounded once to the storage type (in float for
        // bfloat16): the result must equal the double result rounded the same way.
        checkRoundedExactly(out, want);
      }
  TT a = random(DType::F32, {2}, 1), b = random(DType::BF16, {2}, 1), out = zeros(DType::F32, {2});
  CHECK_THROWS_WITH(binaryKernel(BinaryOp::Mul, a.k(), b.k(), out.k(), 1),
                    Catch::Contains("dtypes differ"));
}

TEST_CASE("activations match their formulas", "[forward]") {
  for (DType dtype : kFloatTypes)
    for (Activation kind : {Activation::GeluErf, Activation::GeluTanh, Activation::Silu,
                            Activation::Relu}) {
      TT x = random(dtype, {3, 7, 11}, 11, -6, 6), y = zeros(dtype, {3, 7, 11});
      activationKernel(kind, x.k(), y.k(), 2);
      std::vector<double> want;
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double v = x.at(i);
        switch (kind) {
        case Activation::GeluErf: want.push_back(v * 0.5 * (1 + std::erf(v / std::sqrt(2.0)))); break;
        case Activation::GeluTanh:
          want.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
          break;
        case Activation::Silu: want.push_back(v / (1 + std::exp(-v))); break;
        case Activation::Relu: want.push_back(v > 0 ? v : 0); break;
        }
      }
      checkClose(y, want, dtype == DType::F32 ? 1e-6 : 8e-3);
    }
}

TEST_CASE("layer_norm and rms_norm normalize the last dim", "[forward]") {
  for (DType dtype : kFloatTypes)
    for (int64_t D : {1, 5, 67}) {
      TT x = random(dtype, {2, 3, D}, 12, -3, 5), w = random(dtype, {D}, 13), b = random(dtype, {D}, 14);
      TT y = zeros(dtype, x.shape), r = zeros(dtype, x.shape);
      KTensor wk = w.k(), bk = b.k();
      layerNormKernel(x.k(), &wk, &bk, 1e-5, y.k(), 2);
      rmsNormKernel(x.k(), &wk, 1e-6, r.k(), 2);
      std::vector<double> wantLn, wantRms;
      for (int64_t row = 0; row < 6; ++row) {
        double mean = 0, sq = 0, ms = 0;
        for (int64_t i = 0; i < D; ++i) mean += x.at(row * D + i) / D;
        for (int64_t i = 0; i < D; ++i) {
          const double d = x.at(row * D + i) - mean;
          sq += d * d / D;
          ms += x.at(row * D + i) * x.at(row * D + i) / D;
        }
        for (int64_t i = 0; i < D; ++i) {
          wantLn.push_back((x.at(row * D + i) - mean) / std::sqrt(sq + 1e-5) * w.at(i) + b.at(i));
          wantRms.push_back(x.at(row * D + i) / std::sqrt(ms + 1e-6) * w.at(i));
        }
      }
      checkClose(y, wantLn, tolerance(dtype));
      checkClose(r, wantRms, tolerance(dtype));
    }
}

TEST_CASE("softmax over any dim is stable", "[forward]") {
  for (DType dtype : kFloatTypes)
    for (int64_t dim : {0, 1, 2}) {
      TT x = random(dtype, {3, 4, 5}, 15, -50, 50), y = zeros(dtype, {3, 4, 5});
      x.set(7, 1000);  // would overflow a naive exp
      softmaxKernel(x.k(), dim, y.k(), 2);
      const Shape s = x.shape;
      std::vector<double> want(60);
      int64_t inner = 1;
      for (int64_t d = dim + 1; d < 3; ++d) inner *= s[d];
      const int64_t L = s[dim], outer = 60 / (L * inner);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          double mx = -1e300, sum = 0;
          for (int64_t l = 0; l < L; ++l) mx = std::max(mx, x.at(o * L * inner + l * inner + in));
          for (int64_t l = 0; l < L; ++l) sum += std::exp(x.at(o * L * inner + l * inner + in) - mx);
          for (int64_t l = 0; l < L; ++l)
            want[o * L * inner + l * inner + in] = std::exp(x.at(o * L * inner + l * inner + in) - mx) / sum;
        }
      checkClose(y, want, tolerance(dtype));
    }
}

namespace {
/// mask (optional): an additive [B|1, H|1, T|1, S|1] mask; a row whose every
/// score is -inf is zeros. k and v may have fewer heads than q (grouped-query
/// attention: query head h reads head h / (H / Hkv)).
std::vector<double> naiveAttention(const TT &q, const TT &k, const TT &v, bool causal, double scale,
                                   const TT *mask = nullptr) {
  const int64_t B = q.shape[0], H = q.shape[1], T = q.shape[2], D = q.shape[3];
  const int64_t Hkv = k.shape[1], S = k.shape[2], Dv = v.shape[3];
  std::vector<double> out(size_t(B * H * T * Dv));
  auto maskAt = [&](int64_t b, int64_t h, int64_t t, int64_t s) {
    if (!mask) return 0.0;
    const std::vector<int64_t> &m = mask->shape;
    const int64_t i = (((m[0] == 1 ? 0 : b) * m[1] + (m[1] == 1 ? 0 : h)) * m[2] +
                       (m[2] == 1 ? 0 : t)) * m[3] + (m[3] == 1 ? 0 : s);
    return mask->at(i);
  };
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t kvh = (bh / H) * Hkv + (bh % H) / (H / Hkv);  // k and v's (b, head)
      std::vector<double> p(size_t(S), 0.0);
      double mx = -INFINITY, sum = 0;
      const int64_t valid = causal ? std::min(S, t + 1) : S;
      for (int64_t s = 0; s < valid; ++s) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += q.at((bh * T + t) * D + d) * k.at((kvh * S + s) * D + d);
        p[s] = dot * scale + maskAt(bh / H, bh % H, t, s);
        mx = std::max(mx, p[s]);
      }
      if (mx == -INFINITY) continue;  // every key excluded: zeros
      for (int64_t s = 0; s < valid; ++s) sum += (p[s] = std::exp(p[s] - mx));
      for (int64_t e = 0; e < Dv; ++e) {
        double acc = 0;
        for (int64_t s = 0; s < valid; ++s) acc += p[s] / sum * v.at((kvh * S + s) * Dv + e);
        out[(bh * T + t) * Dv + e] = acc;
      }
    }
  return out;
}
}  // namespace

TEST_CASE("sdpa matches a naive attention, causal or not", "[forward]") {
  for (DType dtype : kFloatTypes)
    for (auto [B, H, T, S, D, Dv] : {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>{1, 1, 1, 1, 1, 1},
                                     {2, 3, 7, 7, 5, 3},
                                     {1, 2, 70, 70, 16, 16},
                                     {1, 1, 5, 9, 4, 6},
                                     {1, 1, 300, 300, 8, 8}})
      for (bool causal : {false, true}) {
        INFO(shardc::plan::dtypeName(dtype) << " T=" << T << " S=" << S << " causal=" << causal);
        TT q = random(dtype, {B, H, T, D}, 16, -2, 2), k = random(dtype, {B, H, S, D}, 17, -2, 2);
        TT v = random(dtype, {B, H, S, Dv}, 18), o = zeros(dtype, {B, H, T, Dv});
        const double scale = 1.0 / std::sqrt(double(D));
        sdpaKernel(q.k(), k.k(), v.k(), nullptr, o.k(), causal, scale, 3);
        checkClose(o, naiveAttention(q, k, v, causal, scale), tolerance(dtype));
      }
}

TEST_CASE("sdpa adds a broadcast mask; a row with no allowed key is zeros", "[forward]") {
  const int64_t B = 2, H = 3, T = 70, S = 70, D = 8, Dv = 5;
  for (DType dtype : kFloatTypes)
    for (std::vector<int64_t> maskShape : {std::vector<int64_t>{B, 1, 1, S}, {B, 1, T, S},
                                           {1, H, T, S}, {B, H, T, 1}, {1, 1, 1, 1}})
      for (bool causal : {false, true}) {
        INFO(shardc::plan::dtypeName(dtype) << " mask " << maskShape[0] << "," << maskShape[1]
                                            << "," << maskShape[2] << "," << maskShape[3]
                                            << " causal=" << causal);
        TT q = random(dtype, {B, H, T, D}, 21, -2, 2), k = random(dtype, {B, H, S, D}, 22, -2, 2);
        TT v = random(dtype, {B, H, S, Dv}, 23), o = zeros(dtype, {B, H, T, Dv});
        // A float bias in [-3, 3], with -inf at the padded keys of sample 1
        // (s >= 50) and on every key of query row 5 (a fully padded row).
        TT mask = random(dtype, maskShape, 24, -3, 3);
        const int64_t mH = maskShape[1], mT = maskShape[2], mS = maskShape[3];
        for (int64_t i = 0; i < mask.numel(); ++i) {
          const int64_t s = i % mS, t = i / mS % mT, b = i / (mS * mT * mH);
          if ((maskShape[0] == B && b == 1 && mS == S && s >= 50) || (mT == T && t == 5))
            mask.set(i, -INFINITY);
        }
        const KTensor maskView = mask.k();
        sdpaKernel(q.k(), k.k(), v.k(), &maskView, o.k(), causal, 1.0 / std::sqrt(double(D)), 3);
        const std::vector<double> want =
            naiveAttention(q, k, v, causal, 1.0 / std::sqrt(double(D)), &mask);
        checkClose(o, want, tolerance(dtype));
        if (mT == T)
          for (int64_t bh = 0; bh < B * H; ++bh)
            for (int64_t e = 0; e < Dv; ++e) CHECK(o.at((bh * T + 5) * Dv + e) == 0.0);
      }
  TT q = random(DType::F32, {1, 1, 4, 8}, 1), o = zeros(DType::F32, {1, 1, 4, 8});
  TT wrong = zeros(DType::F32, {1, 2, 4, 4}), half = zeros(DType::BF16, {1, 1, 4, 4});
  const KTensor wrongView = wrong.k(), halfView = half.k();
  CHECK_THROWS_WITH(sdpaKernel(q.k(), q.k(), q.k(), &wrongView, o.k(), false, 1.0, 1),
                    Catch::Contains("does not broadcast to the scores [1, 1, 4, 4]"));
  CHECK_THROWS_WITH(sdpaKernel(q.k(), q.k(), q.k(), &halfView, o.k(), false, 1.0, 1),
                    Catch::Contains("mask"));
}

TEST_CASE("sdpa reads grouped key / value heads in place, as their repeated copies",
          "[forward]") {
  const int64_t B = 2, H = 6, T = 33, S = 33, D = 8, Dv = 5;
  for (DType dtype : kFloatTypes)
    for (int64_t Hkv : {1, 2, 3})
      for (bool causal : {false, true}) {
        INFO(shardc::plan::dtypeName(dtype) << " Hkv=" << Hkv << " causal=" << causal);
        TT q = random(dtype, {B, H, T, D}, 31, -2, 2), k = random(dtype, {B, Hkv, S, D}, 32, -2, 2);
        TT v = random(dtype, {B, Hkv, S, Dv}, 33), o = zeros(dtype, {B, H, T, Dv});
        // A padding mask [B, 1, 1, S]: sample 1 sees its first 20 keys.
        TT mask = zeros(dtype, {B, 1, 1, S});
        for (int64_t s = 20; s < S; ++s) mask.set(S + s, -INFINITY);
        const KTensor maskView = mask.k();
        const double scale = 1.0 / std::sqrt(double(D));
        sdpaKernel(q.k(), k.k(), v.k(), &maskView, o.k(), causal, scale, 3);
        checkClose(o, naiveAttention(q, k, v, causal, scale, &mask), tolerance(dtype));
        // transformers' repeat_kv: head j copied to heads j*g ... j*g + g - 1.
        // The op on the copies gives the same bytes, so reading the heads in
        // place changes no exported model's outputs.
        const int64_t g = H / Hkv;
        auto repeated = [&](const TT &t, int64_t E) {
          TT r = zeros(dtype, {B, H, S, E});
          for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < H; ++h)
              for (int64_t i = 0; i < S * E; ++i)
                r.set((b * H + h) * S * E + i, t.at((b * Hkv + h / g) * S * E + i));
          return r;
        };
        TT k2 = repeated(k, D), v2 = repeated(v, Dv), o2 = zeros(dtype, {B, H, T, Dv});
        sdpaKernel(q.k(), k2.k(), v2.k(), &maskView, o2.k(), causal, scale, 3);
        CHECK(o.bytes == o2.bytes);
      }
  TT q = random(DType::F32, {1, 6, 4, 8}, 1), o = zeros(DType::F32, {1, 6, 4, 8});
  TT k4 = zeros(DType::F32, {1, 4, 4, 8}), k2 = zeros(DType::F32, {1, 2, 4, 8});
  CHECK_THROWS_WITH(sdpaKernel(q.k(), k4.k(), k4.k(), nullptr, o.k(), false, 1.0, 1),
                    Catch::Contains("H a multiple of Hkv"));
  CHECK_THROWS_WITH(sdpaKernel(q.k(), k2.k(), k4.k(), nullptr, o.k(), false, 1.0, 1),
                    Catch::Contains("do not fit"));
}

TEST_CASE("rope rotates halves by position", "[forward]") {
  for (DType dtype : kFloatTypes) {
    const int64_t B = 2, H = 3, T = 9, D = 8;
    TT x = random(dtype, {B, H, T, D}, 19), y = zeros(dtype, x.shape);
    ropeKernel(x.k(), 10000.0, y.k(), 2);
    std::vector<double> want(size_t(x.numel()));
    for (int64_t r = 0; r < B * H * T; ++r)
      for (int64_t j = 0; j < D / 2; ++j) {
        const double angle = double(r % T) * std::pow(10000.0, -2.0 * j / D);
        const double a = x.at(r * D + j), b = x.at(r * D + j + D / 2);
        want[r * D + j] = a * std::cos(angle) - b * std::sin(angle);
        want[r * D + j + D / 2] = b * std::cos(angle) + a * std::sin(angle);
      }
    checkClose(y, want, dtype == DType::F32 ? 1e-6 : 8e-3);
  }
  TT odd = random(DType::F32, {1, 1, 2, 3}, 1), out = zeros(DType::F32, {1, 1, 2, 3});
  CHECK_THROWS_WITH(ropeKernel(odd.k(), 10000.0, out.k(), 1), Catch::Contains("must be even"));
}

TEST_CASE("strided_copy does transposes and slices", "[forward]") {
  // Transpose [3, 5] -> [5, 3]: y[i][j] = x[j][i].
  TT x = random(DType::BF16, {3, 5}, 20), y = zeros(DType::BF16, {5, 3});
  stridedCopyKernel(x.k(), {1, 5}, 0, y.k());
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 3; ++j) REQUIRE(y.at(i * 3 + j) == x.at(j * 5 + i));
  // Slice rows 1..3, cols 2..4 of a [4, 6] float32: offset 1*6+2, strides [6, 1].
  TT a = random(DType::F32, {4, 6}, 21), s = zeros(DType::F32, {2, 2});
  stridedCopyKernel(a.k(), {6, 1}, 8, s.k());
  CHECK(s.at(0) == a.at(8));
  CHECK(s.at(3) == a.at(15));
  // Every other element of int64, and a 0-d.
  TT ids = zeros(DType::I64, {6});
  for (int i = 0; i < 6; ++i) ids.set(i, i * 10);
  TT evens = zeros(DType::I64, {3}), one = zeros(DType::I64, {});
  stridedCopyKernel(ids.k(), {2}, 0, evens.k());
  stridedCopyKernel(ids.k(), {}, 5, one.k());
  CHECK(evens.at(2) == 40);
  CHECK(one.at(0) == 50);
  CHECK_THROWS_WITH(stridedCopyKernel(a.k(), {6, 1}, 20, s.k()), Catch::Contains("outside"));
  CHECK_THROWS_WITH(stridedCopyKernel(a.k(), {6}, 0, s.k()), Catch::Contains("rank"));
}

TEST_CASE("cat joins along a dim", "[forward]") {
  TT a = random(DType::F32, {2, 1, 3}, 22), b = random(DType::F32, {2, 4, 3}, 23);
  TT y = zeros(DType::F32, {2, 5, 3});
  catKernel({a.k(), b.k()}, 1, y.k());
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t k = 0; k < 3; ++k)
        REQUIRE(y.at((i * 5 + j) * 3 + k) ==
                (j == 0 ? a.at(i * 3 + k) : b.at((i * 4 + j - 1) * 3 + k)));
  TT bad = zeros(DType::F32, {2, 6, 3});
  CHECK_THROWS_WITH(catKernel({a.k(), b.k()}, 1, bad.k()), Catch::Contains("add up to 5"));
}

TEST_CASE("embedding gathers rows and rejects bad ids", "[forward]") {
  for (DType dtype : kFloatTypes) {
    TT w = random(dtype, {7, 3}, 24), ids = zeros(DType::I64, {2, 2}), out = zeros(dtype, {2, 2, 3});
    const int64_t values[] = {6, 0, 3, 6};
    for (int i = 0; i < 4; ++i) ids.set(i, double(values[i]));
    embeddingKernel(w.k(), ids.k(), out.k());
    for (int i = 0; i < 4; ++i)
      for (int d = 0; d < 3; ++d) REQUIRE(out.at(i * 3 + d) == w.at(values[i] * 3 + d));
    ids.set(2, 7);
    CHECK_THROWS_WITH(embeddingKernel(w.k(), ids.k(), out.k()),
                      Catch::Contains("id 7") && Catch::Contains("V = 7"));
  }
}

TEST_CASE("cross_entropy is torch's mean NLL of log_softmax", "[forward]") {
  for (DType dtype : kFloatTypes) {
    const int64_t N = 5, C = 11;
    TT logits = random(dtype, {N, C}, 25, -4, 4), targets = zeros(DType::I64, {N});
    const int64_t t[] = {0, 10, 3, -100, 7};
    for (int i = 0; i < N; ++i) targets.set(i, double(t[i]));
    TT loss = zeros(DType::F32, {});
    crossEntropyKernel(logits.k(), targets.k(), -100, loss.k());
    double want = 0;
    for (int n = 0; n < N; ++n) {
      if (t[n] == -100) continue;
      double sum = 0;
      for (int c = 0; c < C; ++c) sum += std::exp(logits.at(n * C + c));
      want += std::log(sum) - logits.at(n * C + t[n]);
    }
    CHECK(std::abs(loss.at(0) - want / 4) < 1e-5);
    targets.set(1, 11);
    CHECK_THROWS_WITH(crossEntropyKernel(logits.k(), targets.k(), -100, loss.k()),
                      Catch::Contains("target 11"));
  }
}

TEST_CASE("cross_entropy: the same bits on any number of threads", "[forward]") {
  // Rows' terms in parallel, summed in row order: a vocabulary-wide loss
  // (here 300 rows of 2,000 classes, a third of them ignored) must not
  // depend on the kernel threads.
  for (DType dtype : kFloatTypes) {
    const int64_t N = 300, C = 2000;
    TT logits = random(dtype, {N, C}, 26, -8, 8), targets = zeros(DType::I64, {N});
    for (int64_t n = 0; n < N; ++n) targets.set(n, n % 3 == 1 ? -1.0 : double((n * 37) % C));
    TT one = zeros(DType::F32, {}), two = zeros(DType::F32, {}), four = zeros(DType::F32, {});
    crossEntropyKernel(logits.k(), targets.k(), -1, one.k(), 1);
    crossEntropyKernel(logits.k(), targets.k(), -1, two.k(), 2);
    crossEntropyKernel(logits.k(), targets.k(), -1, four.k(), 4);
    CHECK(one.bytes == two.bytes);
    CHECK(one.bytes == four.bytes);
    CHECK(std::isfinite(one.at(0)));
  }
}
