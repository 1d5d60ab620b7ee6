#include "runtime/LocalCommunicator.h"
#include "runtime/RuntimeError.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

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
