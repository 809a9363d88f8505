// A barrier for the threads of one parallel region that waits by spinning, then sleeping. libgomp's own
// barriers always end in a futex wake, a system call (1.1 us in the VMs this runs on), whether or not a
// thread sleeps: the ~10 short steps of each layer of a generated token paid it each time. Here the last
// thread to arrive makes the system call only when a waiter has gone to sleep (after spinning ~50 us: a
// descheduled or oversubscribed thread still does not burn its core for long).
#pragma once

#include <immintrin.h>

#include <atomic>
#include <cstdint>

namespace dllm {

class SpinBarrier {
 public:
  explicit SpinBarrier(int threads) : threads_(threads) {}
  SpinBarrier(const SpinBarrier&) = delete;
  SpinBarrier& operator=(const SpinBarrier&) = delete;

  // Returns once all `threads` have called it; what each did before is visible to all after.
  void wait() {
    const uint32_t generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads_) {
      // The others cannot arrive again before they see the new generation, so the count resets first.
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_seq_cst);
      if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
      return;
    }
    for (int spin = 0; spin < kSpins; ++spin) {
      if (generation_.load(std::memory_order_acquire) != generation) return;
      _mm_pause();
    }
    // seq_cst on both sides: either the last thread sees this sleeper, or this thread sees its generation.
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    while (generation_.load(std::memory_order_seq_cst) == generation) generation_.wait(generation);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  static constexpr int kSpins = 1 << 13;  // ~50 us of pause instructions
  const int threads_;
  std::atomic<int> arrived_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<uint32_t> generation_{0};
};

}  // namespace dllm
