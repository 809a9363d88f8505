// An f32 activation on a backend: `rows` x `cols` values, row-major and contiguous, in memory the backend
// owns (host memory for the CPU, a device buffer for a GPU). The forward passes these handles to the
// backend's ops and never reads through them itself: only the CPU backend's tensors have a host address.
#pragma once

#include <cstdint>

namespace dllm {

struct Tensor {
  void* storage = nullptr;  // the backend's: a float* (CPU), a device buffer (Vulkan)
  int64_t rows = 0, cols = 0;

  int64_t size() const { return rows * cols; }
  // The same values seen as `r` rows of `c` (r * c == size()): per-head norms view [n, heads*hd] as
  // [n*heads, hd].
  Tensor as(int64_t r, int64_t c) const { return {storage, r, c}; }
};

}  // namespace dllm
