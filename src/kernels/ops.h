// Transformer building blocks on f32 activations. They know nothing of models; each has a scalar twin in
// kernels/ref/ that the tests compare against.
#pragma once

#include <cstdint>
#include <vector>

namespace dllm {

// out[r] = w * (x[r] * rsqrt(mean(x[r]^2) + eps)), r < rows. out may alias x.
void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float* out);

// cos/sin of NeoX rotate-half RoPE for positions [0, max_positions), computed in f32 exactly as the HF
// references do: inv_freq[j] = 1 / theta^(2j/hd), angle = pos * inv_freq, emb = [angle, angle].
class RopeTable {
 public:
  RopeTable() = default;
  // freq_factors (empty, or head_dim / 2 values): pair j's frequency divided by freq_factors[j] (Llama 3.1).
  RopeTable(int64_t head_dim, float theta, int64_t max_positions, std::vector<float> freq_factors = {});
  void ensure(int64_t max_positions);  // grows the table when a longer sequence arrives
  const float* cos(int64_t pos) const { return cos_.data() + pos * half_; }
  const float* sin(int64_t pos) const { return sin_.data() + pos * half_; }
  int64_t head_dim() const { return 2 * half_; }

 private:
  int64_t half_ = 0, positions_ = 0;
  float theta_ = 0;
  std::vector<float> freq_factors_;
  std::vector<float> cos_, sin_;  // [positions, head_dim/2]
};

// In place on x[rows, n_heads * head_stride]: x·cos + rotate_half(x)·sin, row r at position positions[r].
// Only the first table.head_dim() values of each head rotate (partial RoPE, LLaDA2: rotary_dim < head_dim);
// the rest pass unchanged. head_stride 0 = table.head_dim().
void rope_neox(float* x, int64_t rows, int64_t n_heads, const int64_t* positions, const RopeTable& table,
               int64_t head_stride = 0);

// Scaled-dot-product attention with GQA, bidirectional unless `block` > 0.
// q: [batch, q_len, n_heads*hd]; k, v: [batch, kv_len, n_kv_heads*hd]; out: [batch, q_len, n_heads*hd].
// key_valid (optional, [batch, kv_len]): 0 excludes that key; a query with no valid key gets zeros.
// block > 0: block-causal attention (LLaDA2, SDAR) as a rule, not a matrix: query i, which is key index
// q_offset + i of the same sequence, sees key j iff j / block <= (q_offset + i) / block.
// scale: the scores' factor; 0 = 1/sqrt(head_dim) (DiffusionGemma's attention is unscaled: 1).
void attention(const float* q, const float* k, const float* v, int64_t batch, int64_t q_len, int64_t kv_len,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, const uint8_t* key_valid, float* out,
               int64_t block = 0, int64_t q_offset = 0, float scale = 0);

// attention's work for heads [head_begin, head_end) of every batch row, on the calling thread: for a caller
// that runs its own parallel region (a generated token's layers, each thread a share of the heads). The same
// bits as attention.
void attention_heads(const float* q, const float* k, const float* v, int64_t batch, int64_t q_len,
                     int64_t kv_len, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                     const uint8_t* key_valid, float* out, int64_t block, int64_t q_offset,
                     int64_t head_begin, int64_t head_end);

// Keys visible to query index `query` (in key order) under a block size; kv_len when block <= 0.
inline int64_t visible_keys(int64_t query, int64_t block, int64_t kv_len) {
  if (block <= 0) return kv_len;
  const int64_t end = (query / block + 1) * block;
  return end < kv_len ? end : kv_len;
}

// out = silu(gate) * up, elementwise. out may alias gate.
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

// y[r] += bias for r < rows.
void add_bias(float* y, const float* bias, int64_t rows, int64_t n);

}  // namespace dllm
