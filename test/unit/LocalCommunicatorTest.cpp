#include "runtime/LocalCommunicator.h"
#include "runtime/Optimizers.h"
#include "runtime/RuntimeError.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

using namespace shardc::runtime;
using namespace std::chrono_literals;

namespace {
/// Runs body(rank) on n threads; returns each rank's error message ("" = ok).
template <typename Body> std::vector<std::string> onRanks(int n, Body body) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const RuntimeError &e) {
        errors[r] = e.what();
      }
    });
  for (auto &t : threads) t.join();
  return errors;
}
}  // namespace

TEST_CASE("all_gather concatenates in rank order, repeatedly", "[comm]") {
  LocalGroup group(3, 10s);
  auto errors = onRanks(3, [&](int r) {
    LocalCommunicator comm(group, r);
    for (int round = 0; round < 50; ++round) {
      int send[2] = {r * 10 + round, -r};
      int recv[6];
      comm.allGather(send, sizeof send, recv);
      for (int s = 0; s < 3; ++s) {
        if (recv[2 * s] != s * 10 + round || recv[2 * s + 1] != -s)
          throw RuntimeError("wrong data");
      }
      comm.barrier();
    }
  });
  for (auto &e : errors) CHECK(e == "");
}

TEST_CASE("a rank that never arrives makes the others time out", "[comm]") {
  LocalGroup group(3, 200ms);
  auto start = std::chrono::steady_clock::now();
  auto errors = onRanks(3, [&](int r) {
    if (r == 2) return;  // never calls the collective
    LocalCommunicator comm(group, r);
    int send = r, recv[3];
    comm.allGather(&send, sizeof send, recv);
  });
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  // Whichever rank times out first names rank 2; the other sees the abort.
  bool named = false;
  for (int r = 0; r < 2; ++r) {
    INFO(errors[r]);
    CHECK(errors[r] != "");
    named = named || errors[r].find("all_gather timed out after 0.2 s waiting for ranks [2]") !=
                         std::string::npos;
  }
  CHECK(named);
  CHECK(group.aborted());
}

TEST_CASE("abort wakes waiting ranks and fails later calls", "[comm]") {
  LocalGroup group(2, 30s);
  auto start = std::chrono::steady_clock::now();
  auto errors = onRanks(2, [&](int r) {
    LocalCommunicator comm(group, r);
    if (r == 1) {
      std::this_thread::sleep_for(50ms);
      group.abort("rank 1 failed: boom");
      return;
    }
    comm.barrier();
  });
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK_THAT(errors[0], Catch::Contains("barrier on rank 0: group aborted: rank 1 failed: boom"));
  LocalCommunicator late(group, 1);
  CHECK_THROWS_WITH(late.barrier(), Catch::Contains("group aborted"));
}

TEST_CASE("mismatched all_gather sizes are an error, not corruption", "[comm]") {
  LocalGroup group(2, 10s);
  auto errors = onRanks(2, [&](int r) {
    LocalCommunicator comm(group, r);
    char send[8] = {}, recv[16];
    comm.allGather(send, r == 0 ? 4 : 8, recv);
  });
  CHECK_THAT(errors[0], Catch::Contains("size mismatch"));
  CHECK_THAT(errors[1], Catch::Contains("size mismatch"));
}

namespace {
/// An asynchronous copier as a device stream would be: copy() only queues,
/// flush() moves the bytes. Counts what it was asked to do.
class DeferredCopier final : public PeerCopier {
public:
  void copy(void *dst, const void *src, size_t bytes) override {
    pending_.push_back({dst, src, bytes});
    bytes_ += bytes;
  }
  void flush() override {
    for (const Pending &p : pending_) std::memcpy(p.dst, p.src, p.bytes);
    pending_.clear();
    ++flushes_;
  }
  size_t bytes() const { return bytes_; }
  int flushes() const { return flushes_; }

private:
  struct Pending {
    void *dst;
    const void *src;
    size_t bytes;
  };
  std::vector<Pending> pending_;
  size_t bytes_ = 0;
  int flushes_ = 0;
};

class FailingCopier final : public PeerCopier {
public:
  void copy(void *, const void *, size_t) override { throw RuntimeError("simulated copy error"); }
};
}  // namespace

TEST_CASE("collectives move their bytes through the rank's copier and flush it before returning",
          "[comm]") {
  // The device-local communicator (runtime/cuda) is this group with an
  // asynchronous copier on each rank's stream: data must be complete when
  // the call returns, and peers' send buffers are only read before that.
  constexpr int n = 3;
  LocalGroup group(n, 10s);
  std::vector<DeferredCopier> copiers(n);
  auto errors = onRanks(n, [&](int r) {
    LocalCommunicator comm(group, r, copiers[r]);
    for (int round = 0; round < 20; ++round) {
      std::vector<int> send = {r * 100 + round, -r, round};
      std::vector<int> recv(3 * n, -1);
      comm.allGather(send.data(), sizeof(int) * 3, recv.data());
      for (int s = 0; s < n; ++s)
        if (recv[3 * s] != s * 100 + round || recv[3 * s + 1] != -s) throw RuntimeError("all_gather");
      // Overwritten right away: a peer still reading it would see this.
      std::fill(send.begin(), send.end(), 777);
      int a = r + round, b[2] = {r, 2 * r};
      std::vector<int> recvA(n), recvB(2 * n);
      comm.allGatherMany({{&a, sizeof a, recvA.data()}, {b, sizeof b, recvB.data()}});
      for (int s = 0; s < n; ++s)
        if (recvA[s] != s + round || recvB[2 * s + 1] != 2 * s) throw RuntimeError("all_gather_many");
      std::vector<int> all = {10, 11, 12};
      int mine = -1;
      comm.scatter(1, r == 1 ? all.data() : nullptr, sizeof(int), &mine);
      if (mine != 10 + r) throw RuntimeError("scatter");
    }
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(errors[r] == "");
    // Per round: all_gather 3 ranks x 12 B, many 3 x (4 + 8) B, scatter 4 B.
    CHECK(copiers[r].bytes() == 20u * (36 + 36 + 4));
    CHECK(copiers[r].flushes() == 20 * 3);
  }
}

TEST_CASE("all_gather in place: a rank's send is its own block of recv, never copied onto itself",
          "[comm]") {
  // The executor converts master weights into this rank's block of the
  // gathered buffer and gathers them in place (docs/plan.md, all_gather).
  constexpr int n = 3;
  LocalGroup group(n, 10s);
  std::vector<DeferredCopier> copiers(n);
  auto errors = onRanks(n, [&](int r) {
    LocalCommunicator comm(group, r, copiers[r]);
    std::vector<int> recv(2 * n, -1);
    recv[2 * r] = 10 * r;
    recv[2 * r + 1] = 10 * r + 1;
    comm.allGather(recv.data() + 2 * r, 2 * sizeof(int), recv.data());
    for (int s = 0; s < n; ++s)
      if (recv[2 * s] != 10 * s || recv[2 * s + 1] != 10 * s + 1) throw RuntimeError("all_gather");
    std::vector<int> unit(n, -1), other(n, -1);
    unit[r] = 100 + r;
    int mine = 200 + r;
    comm.allGatherMany(
        {{unit.data() + r, sizeof(int), unit.data()}, {&mine, sizeof mine, other.data()}});
    for (int s = 0; s < n; ++s)
      if (unit[s] != 100 + s || other[s] != 200 + s) throw RuntimeError("all_gather_many");
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(errors[r] == "");
    // Only the peers' blocks move: 2 x 8 B, then 2 x 4 B in place and 3 x 4 B.
    CHECK(copiers[r].bytes() == 16u + 8u + 12u);
  }
}

TEST_CASE("a rank whose copy fails aborts the group instead of leaving peers waiting", "[comm]") {
  LocalGroup group(3, 20s);
  FailingCopier failing;
  auto start = std::chrono::steady_clock::now();
  auto errors = onRanks(3, [&](int r) {
    LocalCommunicator comm(group, r, r == 1 ? static_cast<PeerCopier &>(failing) : hostCopier());
    int send = r, recv[3];
    comm.allGather(&send, sizeof send, recv);
  });
  // Under AddressSanitizer this also checks that no rank leaves (freeing
  // `send`, on its stack) while a peer still copies from it: 6 of 40 runs
  // read a dead stack frame before ranks waited for the copiers.
  // Far below the 20 s timeout: the peers were woken by the abort.
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK_THAT(errors[1], Catch::Contains("simulated copy error"));
  for (int r : {0, 2}) CHECK_THAT(errors[r], Catch::Contains("all_gather copy on rank 1 failed"));
}

// ---- reduce_scatter (docs/training.md) -----------------------------------

TEST_CASE("scatter_rows: each rank its part of root's unpadded bytes", "[comm][training]") {
  // 10 bytes over 3 ranks of 4: rank 2 receives 2 and keeps its last 2.
  LocalGroup group(3, 10s);
  std::vector<std::array<char, 4>> got(3);
  auto errors = onRanks(3, [&](int r) {
    LocalCommunicator comm(group, r);
    const char source[10] = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'};
    got[r].fill('.');
    comm.scatterRows(1, r == 1 ? source : nullptr, 10, 4, 0, 4, got[r].data());
  });
  for (const std::string &e : errors) CHECK(e.empty());
  CHECK(std::string(got[0].data(), 4) == "abcd");
  CHECK(std::string(got[1].data(), 4) == "efgh");
  CHECK(std::string(got[2].data(), 4) == "ij..");
}

TEST_CASE("scatter_rows: a window of each rank's part", "[comm][training]") {
  // Bytes 1..2 of each 4-byte part of 10 bytes: rank 2's window starts past
  // the end (8 + 1 = 9 is the last byte) and gets one byte.
  LocalGroup group(3, 10s);
  std::vector<std::array<char, 2>> got(3);
  auto errors = onRanks(3, [&](int r) {
    LocalCommunicator comm(group, r);
    const char source[10] = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'};
    got[r].fill('.');
    comm.scatterRows(0, r == 0 ? source : nullptr, 10, 4, 1, 2, got[r].data());
  });
  for (const std::string &e : errors) CHECK(e.empty());
  CHECK(std::string(got[0].data(), 2) == "bc");
  CHECK(std::string(got[1].data(), 2) == "fg");
  CHECK(std::string(got[2].data(), 2) == "j.");
}

TEST_CASE("scatter_rows: ranks that disagree on the window abort", "[comm][training]") {
  LocalGroup group(2, 10s);
  auto errors = onRanks(2, [&](int r) {
    LocalCommunicator comm(group, r);
    char buffer[8] = {};
    char recv[4];
    comm.scatterRows(0, buffer, 8, 4, r == 0 ? 0 : 2, 2, recv);
  });
  for (const std::string &e : errors)
    CHECK_THAT(e, Catch::Contains("scatter_rows window mismatch"));
  LocalGroup one(1, 10s);
  LocalCommunicator comm(one, 0);
  char buffer[4] = {}, recv[4];
  CHECK_THROWS_WITH(comm.scatterRows(0, buffer, 4, 4, 2, 3, recv),
                    Catch::Contains("window 2 + 3 lies outside a part of 4 bytes"));
}

TEST_CASE("scatter_rows: ranks that disagree on the size abort", "[comm][training]") {
  LocalGroup group(2, 10s);
  auto errors = onRanks(2, [&](int r) {
    LocalCommunicator comm(group, r);
    char buffer[8] = {};
    char recv[4];
    comm.scatterRows(0, buffer, r == 0 ? 8 : 6, 4, 0, 4, recv);
  });
  for (const std::string &e : errors) CHECK_THAT(e, Catch::Contains("scatter_rows size mismatch"));
}

namespace {

/// Every rank's shard of reduceScatterKernel over `fulls` (one float
/// tensor [rows, 2] per rank), chunk rows per rank `chunk`; the mean over
/// ranks, or with `mean` false the sum.
template <typename T>
std::vector<std::vector<T>> reduceOnRanks(const std::vector<std::vector<T>> &fulls, int64_t rows,
                                          int64_t chunk, shardc::plan::DType dtype,
                                          bool mean = true) {
  const int n = static_cast<int>(fulls.size());
  LocalGroup group(n, 10s);
  std::vector<std::vector<T>> shards(n, std::vector<T>(static_cast<size_t>(chunk * 2), T(-7)));
  auto errors = onRanks(n, [&](int r) {
    LocalCommunicator comm(group, r);
    KTensor full{dtype, {rows, 2}, const_cast<T *>(fulls[r].data())};
    KTensor shard{dtype, {chunk, 2}, shards[r].data()};
    std::vector<std::byte> work(
        static_cast<size_t>(reduceScatterWorkBytes(shard.shape, dtype, dtype)));
    reduceScatterKernel(comm, full, shard, work.data(), mean);
  });
  for (const std::string &e : errors) REQUIRE(e.empty());
  return shards;
}

}  // namespace

TEST_CASE("reduce_scatter: the mean over ranks in double, rank order, padding zero",
          "[comm][training]") {
  // 5 rows over 3 ranks: chunks of 2, the last rank one row and one padding row.
  const std::vector<std::vector<float>> fulls = {
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
      {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.0f},
      {1e8f, -1e8f, 3, 3, 3, 3, 3, 3, 3, 3}};
  const auto shards = reduceOnRanks(fulls, 5, 2, shardc::plan::DType::F32);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 4; ++i) {
      const int element = r * 4 + i;
      if (element >= 10) {
        CHECK(shards[r][i] == 0.0f);  // padding
        continue;
      }
      const double sum = double(fulls[0][element]) + double(fulls[1][element]) +
                         double(fulls[2][element]);
      CHECK(shards[r][i] == static_cast<float>(sum / 3));
    }
  // 1e8 + 0.1 + 1 in float would lose the 1.1; in double it is kept.
  CHECK(shards[0][0] == static_cast<float>((1e8 + double(0.1f) + 1) / 3));
}

TEST_CASE("reduce_scatter: the sum over ranks (data-parallel shares of one loss)",
          "[comm][training]") {
  const std::vector<std::vector<double>> fulls = {
      {1, 2, 3, 4, 5, 6}, {0.25, 0.5, 0.75, 1, 1.25, 1.5}, {1e300, -1e300, 3, 3, 3, 3}};
  const auto shards = reduceOnRanks(fulls, 3, 1, shardc::plan::DType::F64, /*mean=*/false);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 2; ++i) {
      const int element = r * 2 + i;
      // Summed in long double in rank order, rounded once: not divided.
      const long double sum =
          static_cast<long double>(fulls[0][element]) + fulls[1][element] + fulls[2][element];
      CHECK(shards[r][i] == static_cast<double>(sum));
    }
  CHECK(shards[1][0] == 3 + 0.75 + 3);
  const std::vector<std::vector<float>> f32 = {{1, 2}, {0.5f, 0.25f}};
  const auto s32 = reduceOnRanks(f32, 1, 1, shardc::plan::DType::F32, /*mean=*/false);
  CHECK(s32[0][0] == 1.5f);
  CHECK(s32[0][1] == 2.25f);
  CHECK(s32[1][0] == 0.0f);  // rank 1's chunk is all padding
}

TEST_CASE("reduce_scatter: equal gradients come back bit for bit at any world size",
          "[comm][training]") {
  // The invariance --grad --optimizer relies on: every rank computed the
  // same gradient, and the shards concatenate to it exactly.
  std::vector<float> f32(14);
  std::vector<double> f64(14);
  for (size_t i = 0; i < f32.size(); ++i) {
    f32[i] = std::nextafter(0.1f * float(i + 1), 1.0f) / 3.0f;
    f64[i] = std::nextafter(0.1 * double(i + 1), 1.0) / 3.0;
  }
  for (int n : {2, 3, 5, 7}) {
    INFO("world size " << n);
    const int64_t chunk = (7 + n - 1) / n;
    const auto s32 = reduceOnRanks(std::vector<std::vector<float>>(n, f32), 7, chunk,
                                   shardc::plan::DType::F32);
    const auto s64 = reduceOnRanks(std::vector<std::vector<double>>(n, f64), 7, chunk,
                                   shardc::plan::DType::F64);
    for (int64_t e = 0; e < 14; ++e) {
      const int64_t r = e / (chunk * 2), i = e % (chunk * 2);
      CHECK(std::memcmp(&s32[r][i], &f32[e], sizeof(float)) == 0);
      CHECK(std::memcmp(&s64[r][i], &f64[e], sizeof(double)) == 0);
    }
  }
}

TEST_CASE("reduce_scatter: shards over several windows, workspace of one window",
          "[comm][training]") {
  // 3 ranks' chunks of 2 * (window + 3) elements: two full windows and one
  // of 6; the last rank's 10 padding elements span its last two windows.
  const int n = 3;
  const int64_t chunk = kReduceScatterWindow + 3, rows = 3 * chunk - 5;
  CHECK(reduceScatterWorkBytes({chunk, 2}, shardc::plan::DType::F32, shardc::plan::DType::F32) ==
        kReduceScatterWindow * (8 + 4));
  CHECK(reduceScatterWorkBytes({2, 2}, shardc::plan::DType::BF16, shardc::plan::DType::BF16) ==
        4 * (8 + 2));
  std::vector<std::vector<float>> fulls(n, std::vector<float>(static_cast<size_t>(rows * 2)));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < fulls[r].size(); ++i)
      fulls[r][i] = float(int64_t(i % 1021) - 510) * 0.37f + float(r) * 1e7f;
  const auto shards = reduceOnRanks(fulls, rows, chunk, shardc::plan::DType::F32);
  int64_t mismatches = 0, padding = 0;
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < chunk * 2; ++i) {
      const int64_t element = r * chunk * 2 + i;
      float expected = 0.0f;
      if (element < rows * 2) {
        double sum = 0;
        for (int q = 0; q < n; ++q) sum += double(fulls[q][static_cast<size_t>(element)]);
        expected = static_cast<float>(sum / n);
      } else {
        ++padding;
      }
      if (std::memcmp(&shards[r][static_cast<size_t>(i)], &expected, sizeof(float)) != 0)
        ++mismatches;
    }
  CHECK(padding == 10);
  CHECK(mismatches == 0);
}

TEST_CASE("reduce_scatter: a bfloat16 gradient into a float32 shard, as if cast first",
          "[comm][training]") {
  // Master weights: the shard is the bytes of reducing the gradient
  // converted to float32 (every bfloat16 value is a float32 value).
  const int n = 3;
  const int64_t rows = 7, chunk = 3;
  std::vector<std::vector<uint16_t>> bf(n, std::vector<uint16_t>(rows * 2));
  std::vector<std::vector<float>> widened(n, std::vector<float>(rows * 2));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < bf[r].size(); ++i) {
      bf[r][i] = static_cast<uint16_t>(0x3f00 + 37 * i + 1001 * r);  // finite, 0.5 to 2^18
      const uint32_t bits = uint32_t(bf[r][i]) << 16;
      std::memcpy(&widened[r][i], &bits, 4);
    }
  const auto expected = reduceOnRanks(widened, rows, chunk, shardc::plan::DType::F32);
  LocalGroup group(n, 10s);
  std::vector<std::vector<float>> shards(n, std::vector<float>(chunk * 2, -7.0f));
  auto errors = onRanks(n, [&](int r) {
    LocalCommunicator comm(group, r);
    KTensor full{shardc::plan::DType::BF16, {rows, 2}, bf[r].data()};
    KTensor shard{shardc::plan::DType::F32, {chunk, 2}, shards[r].data()};
    std::vector<std::byte> work(
        static_cast<size_t>(reduceScatterWorkBytes(shard.shape, shard.dtype, full.dtype)));
    CHECK(work.size() == size_t(chunk * 2 * (8 + 2)));  // received in bfloat16
    reduceScatterKernel(comm, full, shard, work.data(), true);
  });
  for (const std::string &e : errors) REQUIRE(e.empty());
  for (int r = 0; r < n; ++r)
    CHECK(std::memcmp(shards[r].data(), expected[r].data(), shards[r].size() * 4) == 0);
  CHECK(shards[2][4] == 0.0f);  // padding

  // Narrowing is not a reduction: float32 into bfloat16 is refused.
  LocalGroup one(1, 10s);
  LocalCommunicator comm(one, 0);
  float g[2] = {1, 2};
  uint16_t s[2];
  std::vector<std::byte> work(64);
  CHECK_THROWS_WITH(reduceScatterKernel(comm, KTensor{shardc::plan::DType::F32, {1, 2}, g},
                                        KTensor{shardc::plan::DType::BF16, {1, 2}, s}, work.data(),
                                        true),
                    Catch::Contains("the gradient is float32 but its shard bfloat16"));
}

TEST_CASE("all_reduce_sum: every rank gets the ranks' sum, in double, rank order",
          "[comm][training]") {
  // A data-parallel batch norm's statistics: each rank's partial sums.
  const std::vector<std::vector<float>> parts = {{1e8f, 1, 2.5f}, {1, -3, 0.25f}, {-1e8f, 0.5f, 4}};
  const int n = 3;
  LocalGroup group(n, 10s);
  std::vector<std::vector<float>> sums(n, std::vector<float>(3, -7.0f));
  auto errors = onRanks(n, [&](int r) {
    LocalCommunicator comm(group, r);
    KTensor x{shardc::plan::DType::F32, {3}, const_cast<float *>(parts[r].data())};
    KTensor y{shardc::plan::DType::F32, {3}, sums[r].data()};
    std::vector<std::byte> work(3 * sizeof(float) * n);
    allReduceSumKernel(comm, x, y, work.data());
  });
  for (const std::string &e : errors) REQUIRE(e.empty());
  for (int r = 0; r < n; ++r) {
    CHECK(sums[r] == sums[0]);  // the same bytes on every rank
    for (int i = 0; i < 3; ++i)
      CHECK(sums[r][i] == static_cast<float>(double(parts[0][i]) + parts[1][i] + parts[2][i]));
  }
  // 1e8 + 1 - 1e8 in float is 0; summed in double once, it is 1.
  CHECK(sums[0][0] == 1.0f);

  // bfloat16 through float; a mismatched output is an error, not a write.
  LocalGroup one(1, 10s);
  LocalCommunicator comm(one, 0);
  uint16_t in[2] = {0x3f80, 0x4000}, out[2] = {0, 0};  // 1.0, 2.0
  std::vector<std::byte> work(4);
  allReduceSumKernel(comm, KTensor{shardc::plan::DType::BF16, {2}, in},
                     KTensor{shardc::plan::DType::BF16, {2}, out}, work.data());
  CHECK(out[0] == 0x3f80);
  CHECK(out[1] == 0x4000);
  CHECK_THROWS_WITH(allReduceSumKernel(comm, KTensor{shardc::plan::DType::BF16, {2}, in},
                                       KTensor{shardc::plan::DType::F32, {2}, out}, work.data()),
                    Catch::Contains("all_reduce_sum: x is bfloat16 of 2 elements, y float32"));
}
