// shardc's own GEMM (runtime/cpu/Gemm.h): each element is a float32 fma
// chain over each group of kGroupK values of k in order (the first from the
// bias, the others from +0), the groups summed in order, so (a) it matches
// that sum bit for bit and a double reference within its error bound, (b) a row's
// bytes do not depend on which rows share its call or on the thread count,
// (c) the AVX-512, AVX2 and portable paths give the same bytes. Which paths
// this machine compared shows in ctest's summary (unit-cpu-features).
#include "runtime/HalfFloat.h"
#include "runtime/cpu/Gemm.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace shardc::runtime;
using namespace shardc::runtime::cpu;
using shardc::plan::DType;

namespace {

/// Values in [-1, 1] stored as `dtype`, kept as raw bytes.
struct Buffer {
  DType dtype;
  std::vector<uint8_t> bytes;
  int64_t size() const { return dtype == DType::F32 ? 4 : 2; }
  float at(int64_t i) const {
    uint16_t h;
    float f;
    if (dtype == DType::F32) return std::memcpy(&f, &bytes[i * 4], 4), f;
    std::memcpy(&h, &bytes[i * 2], 2);
    return dtype == DType::BF16 ? bfloat16BitsToFloat(h) : halfBitsToFloat(h);
  }
};

Buffer randomBuffer(DType dtype, int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Buffer b{dtype, std::vector<uint8_t>(static_cast<size_t>(n * (dtype == DType::F32 ? 4 : 2)))};
  for (int64_t i = 0; i < n; ++i) {
    const float v = dist(gen);
    if (dtype == DType::F32) std::memcpy(&b.bytes[i * 4], &v, 4);
    else {
      const uint16_t h = dtype == DType::BF16 ? floatToBFloat16Bits(v) : floatToHalfBits(v);
      std::memcpy(&b.bytes[i * 2], &h, 2);
    }
  }
  return b;
}

struct Problem {
  int64_t M, N, K;
  bool transB, withBias;
  DType dtype;
  Buffer A, B, bias;
  Problem(int64_t m, int64_t n, int64_t k, bool t, bool wb, DType d, uint32_t seed)
      : M(m), N(n), K(k), transB(t), withBias(wb), dtype(d), A(randomBuffer(d, m * k, seed)),
        B(randomBuffer(d, k * n, seed + 1)), bias(randomBuffer(d, n, seed + 2)) {}
  float a(int64_t i, int64_t k) const { return A.at(i * K + k); }
  float b(int64_t k, int64_t j) const { return transB ? B.at(j * K + k) : B.at(k * N + j); }

  /// Rows [r0, r0 + rows) alone into a fresh C.
  Buffer run(int64_t r0, int64_t rows, int threads, GemmIsa isa) const {
    Buffer C{dtype, std::vector<uint8_t>(static_cast<size_t>(rows * N * A.size()), 0xAB)};
    GemmArgs g{rows, N, K, {dtype, A.bytes.data(), r0 * K, K},
               {dtype, B.bytes.data(), 0, transB ? K : N}, transB,
               withBias ? bias.bytes.data() : nullptr, dtype, 0, C.bytes.data(), dtype, 0, N};
    gemmWithIsa(g, threads, isa);
    return C;
  }
};

float roundTo(DType dtype, float v) {
  if (dtype == DType::BF16) return bfloat16BitsToFloat(floatToBFloat16Bits(v));
  if (dtype == DType::F16) return halfBitsToFloat(floatToHalfBits(v));
  return v;
}

std::vector<GemmIsa> supportedIsas() {
  std::vector<GemmIsa> isas;
  for (GemmIsa isa : {GemmIsa::Portable, GemmIsa::Avx2, GemmIsa::Avx512})
    if (gemmIsaSupported(isa)) isas.push_back(isa);
  return isas;
}

const char *isaName(GemmIsa isa) {
  return isa == GemmIsa::Avx512 ? "avx512" : isa == GemmIsa::Avx2 ? "avx2" : "portable";
}

struct Shape3 {
  int64_t M, N, K;
};
// Odd sizes, panel (32) and block (96 rows, 256 columns, 256 k) edges, K = 0.
const Shape3 kShapes[] = {{1, 1, 1},     {1, 33, 0},    {3, 5, 7},     {13, 31, 17},
                          {12, 32, 256}, {7, 257, 300}, {97, 40, 513}, {70, 300, 64},
                          {200, 64, 9},  {6, 100, 1},   {5, 40, 6000}};

}  // namespace

TEST_CASE("gemm: each element is the groups' fma chains summed, near the double result",
          "[gemm]") {
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (bool transB : {true, false})
      for (bool withBias : {true, false})
        for (const Shape3 &s : kShapes) {
          INFO("M=" << s.M << " N=" << s.N << " K=" << s.K << " transB=" << transB
                    << " bias=" << withBias << " dtype=" << static_cast<int>(dtype));
          const Problem p(s.M, s.N, s.K, transB, withBias, dtype, 7);
          const Buffer C = p.run(0, s.M, 2, bestGemmIsa());
          int64_t mismatches = 0, outOfBound = 0;
          for (int64_t i = 0; i < s.M; ++i)
            for (int64_t j = 0; j < s.N; ++j) {
              const float bias = withBias ? p.bias.at(j) : 0.0f;
              float sum = bias, chain = bias;
              double exact = bias, magnitude = std::fabs(bias);
              for (int64_t k = 0; k < s.K; ++k) {
                if (k > 0 && k % kGroupK == 0) chain = 0.0f;  // a later group: from +0
                chain = std::fma(p.a(i, k), p.b(k, j), chain);
                if ((k + 1) % kGroupK == 0 || k + 1 == s.K) sum = k < kGroupK ? chain : sum + chain;
                exact += static_cast<double>(p.a(i, k)) * p.b(k, j);
                magnitude += std::fabs(static_cast<double>(p.a(i, k)) * p.b(k, j));
              }
              const float got = C.at(i * s.N + j);
              const float want = roundTo(dtype, sum);
              if (std::memcmp(&got, &want, 4) != 0) ++mismatches;
              // Chains of kGroupK fma's and K / kGroupK additions: |error| <=
              // (kGroupK + K / kGroupK) * 2^-24 * sum |terms| (to first order),
              // then one rounding into the storage dtype.
              const double storeUlp = dtype == DType::BF16 ? 0x1p-8 : dtype == DType::F16 ? 0x1p-11 : 0x1p-24;
              const double steps = std::min<double>(s.K, kGroupK) + double(s.K / kGroupK) + 1;
              const double bound = steps * 0x1p-24 * magnitude + storeUlp * std::fabs(exact) + 1e-30;
              if (std::fabs(got - exact) > bound) ++outOfBound;
            }
          CHECK(mismatches == 0);
          CHECK(outOfBound == 0);
        }
}

TEST_CASE("gemm: a row's bytes do not depend on the rows sharing its call or the threads",
          "[gemm]") {
  // 200 rows x 300 columns x 300 k: three row blocks, two column blocks and
  // two k slices, so windows cross every kind of block edge.
  for (DType dtype : {DType::F32, DType::BF16}) {
    const Problem p(200, 300, 300, true, true, dtype, 11);
    const Buffer full = p.run(0, 200, 3, bestGemmIsa());
    const int64_t rowBytes = p.N * full.size();
    int64_t differing = 0;
    for (int64_t M = 1; M <= 70; ++M) {
      const int threads = 1 + static_cast<int>(M % 4);
      for (int64_t r0 : {int64_t(0), 95 - M / 2, 200 - M}) {
        const Buffer part = p.run(r0, M, threads, bestGemmIsa());
        if (std::memcmp(part.bytes.data(), full.bytes.data() + r0 * rowBytes,
                        static_cast<size_t>(M * rowBytes)) != 0) {
          ++differing;
          UNSCOPED_INFO("rows [" << r0 << ", " << r0 + M << ") on " << threads << " threads");
        }
      }
    }
    CHECK(differing == 0);
  }
}

TEST_CASE("gemm: the AVX-512, AVX2 and portable paths give the same bytes", "[gemm]") {
  const std::vector<GemmIsa> isas = supportedIsas();
  REQUIRE(!isas.empty());
  for (DType dtype : {DType::F32, DType::F16})
    for (bool transB : {true, false})
      for (const Shape3 &s : kShapes) {
        const Problem p(s.M, s.N, s.K, transB, true, dtype, 23);
        const Buffer portable = p.run(0, s.M, 1, GemmIsa::Portable);
        for (GemmIsa isa : isas) {
          INFO(isaName(isa) << " M=" << s.M << " N=" << s.N << " K=" << s.K
                            << " transB=" << transB);
          CHECK(p.run(0, s.M, 2, isa).bytes == portable.bytes);
        }
      }
}

TEST_CASE("gemm: accumulate adds groups to C, so K split into calls at groups gives one call's bytes",
          "[gemm]") {
  // A weight gradient summed block of rows by block of rows (moe_experts'
  // backward, 256-row blocks): K = 600 as slices of 256, 256 and 88 (whole
  // groups, and the tail), on every path, against one call.
  for (GemmIsa isa : supportedIsas())
    for (bool transB : {true, false})
      for (bool withBias : {true, false}) {
        INFO(isaName(isa) << " transB=" << transB << " bias=" << withBias);
        const Problem p(37, 70, 600, transB, withBias, DType::F32, 23);
        const Buffer whole = p.run(0, p.M, 2, isa);
        Buffer C{DType::F32, std::vector<uint8_t>(static_cast<size_t>(p.M * p.N * 4), 0)};
        int64_t k0 = 0;
        for (int64_t kb : {kGroupK, kGroupK, int64_t(88)}) {
          // A's columns [k0, k0 + kb): its rows keep their leading dimension
          // K; B's rows (or, transposed, columns) [k0, k0 + kb).
          GemmArgs g{p.M,
                     p.N,
                     kb,
                     {DType::F32, p.A.bytes.data(), k0, p.K},
                     {DType::F32, p.B.bytes.data(), transB ? k0 : k0 * p.N, transB ? p.K : p.N},
                     transB,
                     nullptr,
                     DType::F32,
                     0,
                     C.bytes.data(),
                     DType::F32,
                     0,
                     p.N};
          if (k0 == 0) {  // the first call starts from the bias, as one call does
            g.bias = withBias ? p.bias.bytes.data() : nullptr;
          } else {
            g.accumulate = true;
          }
          gemmWithIsa(g, 1 + static_cast<int>(kb % 3), isa);
          k0 += kb;
        }
        REQUIRE(k0 == p.K);
        CHECK(std::memcmp(C.bytes.data(), whole.bytes.data(), C.bytes.size()) == 0);
      }
}

TEST_CASE("gemm: transA reads A stored as K rows of M and gives the bytes of A itself", "[gemm]") {
  // A transposed operand is read in place (a weight gradient's x^T g):
  // the same chains, so the same bytes as A copied into M rows of K, on
  // every path, dtype and shape (sub-blocks of rows at an offset too).
  for (GemmIsa isa : supportedIsas())
    for (DType dtype : {DType::F32, DType::BF16, DType::F16})
      for (bool transB : {true, false})
        for (const Shape3 &s : kShapes) {
          INFO(isaName(isa) << " M=" << s.M << " N=" << s.N << " K=" << s.K
                            << " transB=" << transB);
          const Problem p(s.M, s.N, s.K, transB, true, dtype, 29);
          Buffer At{dtype, std::vector<uint8_t>(p.A.bytes.size())};
          const int64_t size = p.A.size();
          for (int64_t i = 0; i < s.M; ++i)
            for (int64_t k = 0; k < s.K; ++k)
              std::memcpy(&At.bytes[(k * s.M + i) * size], &p.A.bytes[(i * s.K + k) * size],
                          static_cast<size_t>(size));
          const int64_t r0 = s.M / 3, rows = s.M - r0;
          const Buffer want = p.run(r0, rows, 2, isa);
          Buffer C{dtype, std::vector<uint8_t>(want.bytes.size(), 0xCD)};
          GemmArgs g{rows,
                     s.N,
                     s.K,
                     {dtype, At.bytes.data(), r0, s.M},
                     {dtype, p.B.bytes.data(), 0, transB ? s.K : s.N},
                     transB,
                     p.bias.bytes.data(),
                     dtype,
                     0,
                     C.bytes.data(),
                     dtype,
                     0,
                     s.N};
          g.transA = true;
          gemmWithIsa(g, 2, isa);
          CHECK(C.bytes == want.bytes);
        }
}
