// Index maps, the Householder QR behind `orthogonal`, and the local scatter.
#include "runtime/InitOps.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/RuntimeError.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

using namespace shardc::runtime;
using Catch::Matchers::Contains;

namespace {

std::vector<int64_t> mapAll(const IndexMap &map, const std::vector<int64_t> &full,
                            const std::vector<int64_t> &source, int64_t begin, int64_t count) {
  std::vector<int64_t> out(count), p;
  mapFlatIndices(map, full, source, begin, count, out.data(), p, true);
  return out;
}

}  // namespace

TEST_CASE("index_map: transpose, identity and affine arithmetic", "[exec][indexmap]") {
  IndexMap transpose = IndexMap::parse({2, 2, 0, 1, 2, 0, 0}, 2, 2);
  // Output 3x5 reading a 5x3 source: out[i][j] = src[j][i] = flat j*3 + i.
  std::vector<int64_t> flat = mapAll(transpose, {3, 5}, {5, 3}, 0, 15);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) CHECK(flat[i * 5 + j] == j * 3 + i);
  // Blocks carry the multi-index: two halves equal the whole.
  std::vector<int64_t> first(7), second(8), p;
  mapFlatIndices(transpose, {3, 5}, {5, 3}, 0, 7, first.data(), p, true);
  mapFlatIndices(transpose, {3, 5}, {5, 3}, 7, 8, second.data(), p, false);
  first.insert(first.end(), second.begin(), second.end());
  CHECK(first == flat);
  // Starting mid-tensor.
  CHECK(mapAll(transpose, {3, 5}, {5, 3}, 6, 3) ==
        std::vector<int64_t>{flat[6], flat[7], flat[8]});

  CHECK(mapAll(IndexMap::identity(2), {2, 3}, {2, 3}, 0, 6) ==
        std::vector<int64_t>{0, 1, 2, 3, 4, 5});

  // A reshape [2, 6] -> source [3, 4]: flat = 6*p0 + p1, s = (flat floordiv 4, flat mod 4).
  std::vector<int64_t> enc = {2, 11, 0, 0, 1, 6, 3, 0, 1, 2, 1, 4, 4,
                              11, 0, 0, 1, 6, 3, 0, 1, 2, 1, 4, 5};
  CHECK(mapAll(IndexMap::parse(enc, 2, 2), {2, 6}, {3, 4}, 0, 12) ==
        std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});

  // MLIR semantics on negatives: floordiv(-7, 2) = -4, ceildiv(-7, 2) = -3, mod(-7, 2) = 1.
  auto eval1 = [](std::vector<int64_t> program) {
    std::vector<int64_t> enc = {1, static_cast<int64_t>(program.size())};
    enc.insert(enc.end(), program.begin(), program.end());
    IndexMap map = IndexMap::parse(enc, 1, 1);
    std::vector<int64_t> stack(map.maxStack());
    int64_t p = 0, s = 0;
    map.evaluate(&p, &s, stack.data());
    return s;
  };
  CHECK(eval1({1, -7, 1, 2, 4}) == -4);
  CHECK(eval1({1, -7, 1, 2, 6}) == -3);
  CHECK(eval1({1, -7, 1, 2, 5}) == 1);
  CHECK(eval1({1, 7, 1, 2, 4}) == 3);
  CHECK(eval1({1, 7, 1, 2, 6}) == 4);
  CHECK(eval1({1, 7, 1, 3, 5}) == 1);
  CHECK(eval1({1, 7, 1, 3, 3, 1, 2, 2}) == 23);  // 7 * 3 + 2
  CHECK_THROWS_WITH(eval1({1, 7, 1, 0, 4}), Contains("floordiv of 7 by zero"));
  CHECK_THROWS_WITH(eval1({1, 7, 1, 0, 5}), Contains("mod of 7 by zero"));
  CHECK_THROWS_WITH(eval1({1, INT64_MAX, 1, 2, 3}), Contains("overflows int64"));
}

TEST_CASE("index_map: malformed encodings are rejected with the entry", "[exec][indexmap]") {
  auto parse = [](std::vector<int64_t> enc) { return IndexMap::parse(enc, 2, 2); };
  CHECK_THROWS_WITH(parse({}), Contains("malformed index_map: entry 0: the list is empty"));
  CHECK_THROWS_WITH(parse({1, 2, 0, 0}),
                    Contains("entry 0: 1 results, but source_shape has rank 2"));
  CHECK_THROWS_WITH(parse({2, 2, 0, 1}), Contains("ends before result 1"));
  CHECK_THROWS_WITH(parse({2, 6, 0, 1, 2, 0, 0}),
                    Contains("result 0 has length 6, but 5 entries follow"));
  CHECK_THROWS_WITH(parse({2, 0, 2, 0, 0}), Contains("result 0 has length 0"));
  CHECK_THROWS_WITH(parse({2, 2, 0, 2, 2, 0, 0}),
                    Contains("entry 3: dim 2 out of range for an output of rank 2"));
  CHECK_THROWS_WITH(parse({2, 2, 0, -1, 2, 0, 0}), Contains("dim -1 out of range"));
  CHECK_THROWS_WITH(parse({2, 1, 0, 2, 0, 0}), Contains("token 0 (dim) has no operand"));
  CHECK_THROWS_WITH(parse({2, 3, 0, 1, 2, 2, 0, 0}),
                    Contains("entry 4: operator 2 needs two operands, the stack has 1"));
  CHECK_THROWS_WITH(parse({2, 4, 0, 1, 0, 0, 2, 0, 0}),
                    Contains("result 0 leaves 2 values on the stack"));
  CHECK_THROWS_WITH(parse({2, 2, 0, 1, 2, 0, 0, 9}), Contains("1 trailing entries"));
  CHECK_THROWS_WITH(parse({2, 2, 7, 1, 2, 0, 0}), Contains("entry 2: unknown token 7"));
  // Out-of-range source indices are found when mapping.
  IndexMap shift = IndexMap::parse({2, 2, 0, 0, 5, 0, 1, 1, 1, 2}, 2, 2);  // (p0, p1 + 1)
  CHECK_THROWS_WITH(mapAll(shift, {2, 3}, {2, 3}, 0, 6),
                    Contains("index_map sends output element [0, 2] to [0, 3], outside "
                             "source_shape [2, 3]"));
}

namespace {

/// max |Q^T Q - I| over an m x n (m >= n) row-major matrix.
double orthonormalityError(const std::vector<double> &q, int64_t m, int64_t n) {
  double worst = 0;
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < n; ++b) {
      double dot = 0;
      for (int64_t i = 0; i < m; ++i) dot += q[i * n + a] * q[i * n + b];
      worst = std::max(worst, std::abs(dot - (a == b ? 1.0 : 0.0)));
    }
  return worst;
}

}  // namespace

TEST_CASE("Householder QR: orthonormal Q, positive-diagonal R = Q^T A", "[exec][qr]") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  for (auto [m, n] : {std::pair<int64_t, int64_t>{5, 3}, {3, 3}, {64, 64}, {27, 8}, {1, 1},
                      {7, 1}}) {
    INFO(m << " x " << n);
    std::vector<double> a(m * n);
    for (double &x : a) x = normal(rng);
    std::vector<double> q = a, work(3 * n);
    householderSignedQ(q.data(), m, n, work.data());
    CHECK(orthonormalityError(q, m, n) < 1e-12);
    // R = Q^T A is upper triangular with a positive diagonal (A = Q R).
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double r = 0;
        for (int64_t k = 0; k < m; ++k) r += q[k * n + i] * a[k * n + j];
        if (i > j) CHECK(std::abs(r) < 1e-10);
        if (i == j) CHECK(r > 0);
      }
  }
  // Rank-deficient input (a zero column) still gives an orthonormal Q.
  std::vector<double> a = {1, 0, 2, 0, 3, 0}, work(6);
  householderSignedQ(a.data(), 3, 2, work.data());
  CHECK(orthonormalityError(a, 3, 2) < 1e-12);
  // Only the 3n QR scalars for float32/float64 (factored in place); half
  // types add an m x n float32 matrix.
  CHECK(orthogonalWorkBytes({5, 3}, shardc::plan::DType::F32) == 9 * 8);
  CHECK(orthogonalWorkBytes({3, 5}, shardc::plan::DType::F64) == 9 * 8);
  CHECK(orthogonalWorkBytes({8, 3, 3, 3}, shardc::plan::DType::F32) == 24 * 8);
  CHECK(orthogonalWorkBytes({8, 3, 3, 3}, shardc::plan::DType::BF16) == 24 * 8 + 27 * 8 * 4);
  CHECK(orthogonalWorkBytes({8}, shardc::plan::DType::F32) == -1);
  CHECK(orthogonalWorkBytes({}, shardc::plan::DType::F32) == -1);
}

TEST_CASE("Householder QR in float32 and through strides equals the double one closely",
          "[exec][qr]") {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  for (auto [m, n] : {std::pair<int64_t, int64_t>{5, 3}, {64, 64}, {40, 7}, {1, 1}}) {
    INFO(m << " x " << n);
    std::vector<double> exact(m * n);
    for (double &x : exact) x = static_cast<float>(normal(rng));  // float-representable
    std::vector<double> work(3 * n);
    std::vector<double> reference = exact;
    householderSignedQ(reference.data(), m, n, work.data());
    // float32, row-major.
    std::vector<float> single(exact.begin(), exact.end());
    householderSignedQ(single.data(), m, n, work.data());
    // The same matrix stored transposed (column-major), read with strides.
    std::vector<double> columns(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) columns[j * m + i] = exact[i * n + j];
    householderSignedQ(columns.data(), m, n, int64_t(1), m, work.data());
    double floatError = 0, strideError = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        floatError = std::max(floatError, std::abs(single[i * n + j] - reference[i * n + j]));
        strideError = std::max(strideError, std::abs(columns[j * m + i] - reference[i * n + j]));
      }
    CHECK(floatError < 1e-5);
    CHECK(strideError < 1e-13);
    std::vector<double> widened(single.begin(), single.end());
    CHECK(orthonormalityError(widened, m, n) < 1e-5);
  }
}

TEST_CASE("orthogonal on several threads is bit-identical to one thread", "[exec][qr]") {
  // Large enough that every thread count below splits the early reflectors'
  // updates (over 2^17 elements) and the late ones run on one thread; tall,
  // wide (factored through the transpose's strides) and each dtype family:
  // float32, float64 and bfloat16 (through its float32 copy).
  using shardc::plan::DType;
  init::GeneratorSpec normal;
  normal.kind = init::GeneratorKind::Normal;
  normal.seed = 5;
  normal.streamHash = 0x51a7e;
  normal.mean = 0;
  normal.std = 1;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{640, 300}, {300, 640}})
    for (DType dtype : {DType::F32, DType::F64, DType::BF16}) {
      INFO(rows << " x " << cols << " dtype " << static_cast<int>(dtype));
      normal.shape = {rows, cols};
      const size_t bytes = static_cast<size_t>(rows * cols * dtypeSize(dtype));
      std::vector<std::byte> work(static_cast<size_t>(orthogonalWorkBytes({rows, cols}, dtype)));
      std::vector<std::byte> one(bytes);
      orthogonalOnHost(normal, 1.5, dtype, rows, cols, one.data(), work.data(), 1);
      for (int threads : {2, 3, 8}) {
        INFO(threads << " threads");
        std::vector<std::byte> many(bytes);
        orthogonalOnHost(normal, 1.5, dtype, rows, cols, many.data(), work.data(), threads);
        CHECK(std::memcmp(one.data(), many.data(), bytes) == 0);
      }
      if (dtype == DType::F64) {  // and it is orthogonal (times the gain)
        std::vector<double> q(rows * cols);
        std::memcpy(q.data(), one.data(), bytes);
        for (double &x : q) x /= 1.5;
        if (rows < cols) {  // the rows are orthonormal: check the transpose
          std::vector<double> t(rows * cols);
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = q[i * cols + j];
          CHECK(orthonormalityError(t, cols, rows) < 1e-12);
        } else {
          CHECK(orthonormalityError(q, rows, cols) < 1e-12);
        }
      }
    }
}

TEST_CASE("local scatter: each rank gets its slice of root's buffer", "[exec][comm]") {
  for (int64_t n = 1; n <= 5; ++n)
    for (int64_t root = 0; root < n; ++root) {
      INFO("world " << n << " root " << root);
      const size_t per = 6;
      std::vector<uint8_t> send(n * per);
      for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<uint8_t>(i + 1);
      std::vector<std::vector<uint8_t>> recv(n, std::vector<uint8_t>(per, 0));
      LocalGroup group(n, std::chrono::seconds(10));
      std::vector<std::thread> threads;
      for (int64_t r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
          LocalCommunicator comm(group, r);
          comm.scatter(root, r == root ? send.data() : nullptr, per, recv[r].data());
        });
      for (auto &t : threads) t.join();
      for (int64_t r = 0; r < n; ++r)
        CHECK(recv[r] == std::vector<uint8_t>(send.begin() + r * per,
                                              send.begin() + (r + 1) * per));
    }
}

TEST_CASE("local scatter: mismatches and timeouts fail clearly", "[exec][comm]") {
  {
    LocalGroup group(2, std::chrono::seconds(10));
    std::vector<std::string> errors(2);
    std::vector<uint8_t> send(8), recv0(4), recv1(4);
    std::thread t([&] {
      try {
        LocalCommunicator(group, 1).scatter(1, nullptr, 4, recv1.data());
      } catch (const RuntimeError &e) { errors[1] = e.what(); }
    });
    try {
      LocalCommunicator(group, 0).scatter(0, send.data(), 4, recv0.data());
    } catch (const RuntimeError &e) { errors[0] = e.what(); }
    t.join();
    for (const std::string &e : errors) CHECK_THAT(e, Contains("scatter root mismatch"));
  }
  {
    LocalGroup group(2, std::chrono::milliseconds(100));
    std::vector<uint8_t> send(8), recv(4);
    CHECK_THROWS_WITH(LocalCommunicator(group, 0).scatter(0, send.data(), 4, recv.data()),
                      Contains("scatter timed out after") && Contains("waiting for ranks [1]"));
  }
  {
    LocalGroup group(1);
    std::vector<uint8_t> recv(4);
    CHECK_THROWS_WITH(LocalCommunicator(group, 0).scatter(0, nullptr, 4, recv.data()),
                      Contains("root 0 passed no send buffer"));
  }
}
