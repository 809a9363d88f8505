#include "kernels/profile.h"

namespace dllm {

bool KernelProfile::enabled = false;
double KernelProfile::seconds[static_cast<int>(KernelKind::kCount)] = {};

void KernelProfile::reset() {
  for (double& s : seconds) s = 0;
}

const char* KernelProfile::name(KernelKind k) {
  switch (k) {
    case KernelKind::kMatmul: return "matmul";
    case KernelKind::kAttention: return "attention";
    case KernelKind::kNorm: return "rmsnorm";
    case KernelKind::kRope: return "rope";
    case KernelKind::kActivation: return "silu*up";
    case KernelKind::kOther: return "other";
    case KernelKind::kCount: break;
  }
  return "?";
}

}  // namespace dllm
