// Scalar reference implementations (double accumulation, no SIMD, no threads): the truth the fast kernels are
// tested against, written to read like the PyTorch references.
#pragma once

#include <cstdint>
#include <vector>

namespace dllm::ref {

// y[M, N] = x[M, K] · w[N, K]ᵀ
void matmul(const float* x, const float* w, int64_t m, int64_t n, int64_t k, float* y);
void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float* out);
// RoPE angles computed in double.
// rotary_dim < head_dim: only the first rotary_dim values of each head rotate, frequencies over rotary_dim.
void rope_neox(float* x, int64_t rows, int64_t n_heads, int64_t head_dim, const int64_t* positions, double theta,
               int64_t rotary_dim = 0);
void attention(const float* q, const float* k, const float* v, int64_t batch, int64_t q_len, int64_t kv_len,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, const uint8_t* key_valid, float* out,
               int64_t block = 0, int64_t q_offset = 0);
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

}  // namespace dllm::ref
