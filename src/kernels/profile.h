// Optional per-kernel timing (off by default: one clock read per kernel call when on), for `dllm bench`'s
// breakdown of where a forward pass spends its time.
#pragma once

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
// (they parallelise inside), so plain doubles suffice.
class ScopedKernelTimer {
 public:
  explicit ScopedKernelTimer(KernelKind kind) : kind_(kind) {
    if (KernelProfile::enabled) start_ = std::chrono::steady_clock::now();
  }
  ~ScopedKernelTimer() {
    if (KernelProfile::enabled)
      KernelProfile::seconds[static_cast<int>(kind_)] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  KernelKind kind_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dllm
