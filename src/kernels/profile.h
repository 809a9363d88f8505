// Optional per-kernel timing (off by default: one clock read per kernel call when on), for `dllm bench`'s
// breakdown of where a forward pass spends its time.
#pragma once

#include <omp.h>

#include <chrono>

namespace dllm {

enum class KernelKind { kMatmul, kAttention, kNorm, kRope, kActivation, kOther, kCount };

struct KernelProfile {
  static bool enabled;
  static double seconds[static_cast<int>(KernelKind::kCount)];
  static void reset();
  static const char* name(KernelKind k);
};

// Adds the lifetime of this object to `kind` when profiling is on. Kernels are called from one thread at a time
// (they parallelise inside), so plain doubles suffice; a kernel called inside a parallel region (the experts of a
// mixture-of-experts layer run one per thread) is not timed: its caller times the whole region.
class ScopedKernelTimer {
 public:
  explicit ScopedKernelTimer(KernelKind kind) : kind_(kind), on_(KernelProfile::enabled && !omp_in_parallel()) {
    if (on_) start_ = std::chrono::steady_clock::now();
  }
  ~ScopedKernelTimer() {
    if (on_)
      KernelProfile::seconds[static_cast<int>(kind_)] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  KernelKind kind_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dllm
