// The Vulkan ops so far, each checked against the CPU's scalar references (tests/vulkan): the f32 product
// y = x·Wᵀ (+ y), RMSNorm, SwiGLU's product, NeoX RoPE, attention (grouped-query heads, the padding and
// block-causal masks), and the per-position reductions a denoising step ranks positions by, computed where the
// logits are so that only O(positions) numbers come back to the host. f32 throughout.
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
  // out[r, :] = w ⊙ x[r, :] / sqrt(mean(x[r, :]²) + eps).
  void rms_norm(const Buffer& x, const Buffer& w, Buffer& out, uint32_t rows, uint32_t dim, float eps);
  // out = silu(gate) ⊙ up over n values.
  void silu_mul(const Buffer& gate, const Buffer& up, Buffer& out, uint32_t n);
  // NeoX RoPE in place on x[rows, heads, head_dim] at `positions` (one a row), the first rotary_dim values of
  // each head (0: all); angles in double on the host, as ref::rope_neox.
  void rope_neox(Buffer& x, uint32_t rows, uint32_t heads, uint32_t head_dim, const std::vector<int64_t>& positions,
                 double theta, uint32_t rotary_dim = 0);
  // ref::attention's contract: q [batch, q_len, heads, head_dim], k / v [batch, kv_len, kv_heads, head_dim],
  // key_valid [batch, kv_len] (empty: all visible), block > 0: block-causal with queries at q_offset.
  void attention(const Buffer& q, const Buffer& k, const Buffer& v, const std::vector<uint8_t>& key_valid,
                 Buffer& out, uint32_t batch, uint32_t q_len, uint32_t kv_len, uint32_t heads, uint32_t kv_heads,
                 uint32_t head_dim, uint32_t block = 0, uint32_t q_offset = 0);

 private:
  Context* ctx_;
  std::unique_ptr<Kernel> matmul_f32_, token_stats_, rms_norm_, silu_mul_, rope_neox_, attention_;
};

}  // namespace dllm::vk
