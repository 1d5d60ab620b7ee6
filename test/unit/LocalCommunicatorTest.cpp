#include "runtime/LocalCommunicator.h"
#include "runtime/RuntimeError.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
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
