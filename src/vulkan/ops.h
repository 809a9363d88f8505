// The first Vulkan ops, each checked against the CPU's scalar references (tests/vulkan): the f32 product
// y = x·Wᵀ (+ y), and the per-position reductions a denoising step ranks positions by, computed where the logits
// are so that only O(positions) numbers come back to the host.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "vulkan/buffer.h"
#include "vulkan/context.h"
#include "vulkan/kernel.h"

namespace dllm::vk {

// What token_stats gives per row of logits: see src/vulkan/shaders/token_stats.comp.
struct TokenStats {
  std::vector<uint32_t> argmax;        // [rows]
  std::vector<float> p_max;            // softmax probability of the argmax
  std::vector<float> margin;           // p_top1 - p_top2
  std::vector<float> neg_entropy;      // Σ p·log(p + 1e-10)
};

class Ops {
 public:
  explicit Ops(Context& ctx);
  ~Ops();

  // y[m, n] (+)= x[m, k] · w[n, k]ᵀ, all f32 device buffers.
  void matmul_f32(const Buffer& x, const Buffer& w, Buffer& y, uint32_t m, uint32_t n, uint32_t k,
                  bool accumulate);
  // Per row of `logits` [rows, vocab]: argmax and the softmax statistics; downloads 16 bytes a row.
  TokenStats token_stats(const Buffer& logits, uint32_t rows, uint32_t vocab);

 private:
  Context* ctx_;
  std::unique_ptr<Kernel> matmul_f32_, token_stats_;
};

}  // namespace dllm::vk
