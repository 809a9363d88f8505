// SpinBarrier: no thread leaves a round before all have arrived, over many rounds, whether the waiters spin
// (everyone arrives at once) or have gone to sleep (one thread late by more than the spinning lasts).
#include "core/spin_barrier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace dllm {
namespace {

// Each of `threads` threads adds 1 to a counter, waits, and checks that every thread's add of this round is
// there; `late` delays thread 0 before each round's add. Returns the rounds in which some thread saw fewer.
int rounds_seen_short(int threads, int rounds, std::chrono::microseconds late) {
  SpinBarrier barrier(threads);
  std::atomic<int> arrived{0}, short_rounds{0};
  std::vector<std::thread> team;
  for (int t = 0; t < threads; ++t)
    team.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r) {
        if (t == 0 && late.count() > 0) std::this_thread::sleep_for(late);
        arrived.fetch_add(1, std::memory_order_relaxed);
        barrier.wait();
        if (arrived.load(std::memory_order_relaxed) < threads * (r + 1)) short_rounds.fetch_add(1);
        barrier.wait();  // nobody adds for the next round before all have checked this one
      }
    });
  for (auto& th : team) th.join();
  return short_rounds.load();
}

TEST(SpinBarrier, NobodyLeavesBeforeAllArrive) {
  EXPECT_EQ(rounds_seen_short(2, 20000, std::chrono::microseconds(0)), 0);
  EXPECT_EQ(rounds_seen_short(4, 5000, std::chrono::microseconds(0)), 0);  // more threads than cores here
}

TEST(SpinBarrier, SleepingWaitersAreWoken) {
  // 2 ms late: the others spin ~50 us, then sleep on the futex, and must be woken by the last arrival.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(rounds_seen_short(3, 50, std::chrono::milliseconds(2)), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace dllm
