#include "kernels/ops.h"

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/parallel.h"
#include "kernels/profile.h"
#include "kernels/simd_math.h"

namespace dllm {

namespace {

// s[i] = exp(s[i] - max) for i < n; returns the sum.
inline float exp_shifted_sum(float* s, int64_t n, float max) {
  float sum = 0;
  int64_t i = 0;
  const __m256 vmax = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + i), vmax));
    _mm256_storeu_ps(s + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  sum = hsum256(vsum);
  for (; i < n; ++i) {
    s[i] = std::exp(s[i] - max);
    sum += s[i];
  }
  return sum;
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float* out) {
  ScopedKernelTimer timer(KernelKind::kNorm);
  parallel_for_if(rows * dim > 32768, rows, [&](int64_t r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    // Mean of squares accumulated in double: order-independent to f32 precision, so eight double lanes may
    // sum it (a serial double sum was 1.2 us of latency-bound adds a 896-wide row, 49 rows a token).
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= dim; i += 8) {
      const __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(xr + i)),
                    hi = _mm256_cvtps_pd(_mm_loadu_ps(xr + i + 4));
      acc0 = _mm256_fmadd_pd(lo, lo, acc0);
      acc1 = _mm256_fmadd_pd(hi, hi, acc1);
    }
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, _mm256_add_pd(acc0, acc1));
    double ss = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(dim)) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = w[i] * (xr[i] * scale);
  });
}

RopeTable::RopeTable(int64_t head_dim, float theta, int64_t max_positions, std::vector<float> freq_factors)
    : half_(head_dim / 2), theta_(theta), freq_factors_(std::move(freq_factors)) {
  if (!freq_factors_.empty() && static_cast<int64_t>(freq_factors_.size()) != half_)
    fail("RoPE: ", freq_factors_.size(), " frequency factors for ", half_, " rotated pairs");
  ensure(max_positions);
}

void RopeTable::ensure(int64_t max_positions) {
  if (max_positions <= positions_) return;
  cos_.resize(static_cast<size_t>(max_positions * half_));
  sin_.resize(cos_.size());
  const int64_t hd = 2 * half_;
  for (int64_t j = 0; j < half_; ++j) {
    // f32 throughout, in the order torch evaluates 1.0 / (theta ** (arange(0, hd, 2).float() / hd)).
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(hd);
    float inv_freq = 1.0f / std::pow(theta_, exponent);
    if (!freq_factors_.empty())
      inv_freq /= freq_factors_[j];  // Llama 3.1 rope_scaling (llama.cpp's rope_freqs)
    for (int64_t p = positions_; p < max_positions; ++p) {
      const float angle = static_cast<float>(p) * inv_freq;
      cos_[p * half_ + j] = std::cos(angle);
      sin_[p * half_ + j] = std::sin(angle);
    }
  }
  positions_ = max_positions;
}

void rope_neox(float* x, int64_t rows, int64_t n_heads, const int64_t* positions, const RopeTable& table,
               int64_t head_stride) {
  ScopedKernelTimer timer(KernelKind::kRope);
  const int64_t half = table.head_dim() / 2, hd = head_stride > 0 ? head_stride : table.head_dim();
  parallel_for_if(rows * n_heads * hd > 32768, rows, [&](int64_t r) {
    const float* c = table.cos(positions[r]);
    const float* s = table.sin(positions[r]);
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (r * n_heads + h) * hd;
      for (int64_t j = 0; j < half; ++j) {
        const float a = v[j], b = v[j + half];
        v[j] = a * c[j] - b * s[j];
        v[j + half] = b * c[j] + a * s[j];
      }
    }
  });
}

// Per (row, head): scores = Q Kᵀ and out = P V as two sgemms over a block of queries (single-threaded inside
// our parallel loop), the masked softmax in between. One dot product per (query, key) measured ~30 GFLOP/s;
// the sgemms reuse each key and value row across the whole query block. oneDNN's sgemm, not OpenBLAS's:
// OpenBLAS 0.3.21 picks its kernels from a CPU model table and falls back to SSE3 ("Prescott") on CPUs newer
// than it (Sapphire Rapids Xeons here), which made attention 3.4x slower (20.6% vs 6.1% of a 1024-token
// llada-1b forward); oneDNN dispatches on the instruction sets cpuid reports.
namespace {

constexpr int64_t kQueryBlock = 256;  // bounds the score block at 256 x kv_len floats per thread

// Head h of batch row b, queries [qb * kQueryBlock, + kQueryBlock): scores in `scores` (the caller's, sized
// for a query block).
void attend(const float* q, const float* k, const float* v, int64_t b, int64_t h, int64_t qb, int64_t q_len,
            int64_t kv_len, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, const uint8_t* key_valid,
            float* out, int64_t block, int64_t q_offset, float* scores, float scale) {
  const int64_t q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim;
  const int64_t rep = n_heads / n_kv_heads;
  if (scale == 0) scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t i0 = qb * kQueryBlock, rows = std::min(kQueryBlock, q_len - i0);
  const int64_t kvh = h / rep;
  const float* qh = q + (b * q_len + i0) * q_dim + h * head_dim;
  const float* kh = k + b * kv_len * kv_dim + kvh * head_dim;
  const float* vh = v + b * kv_len * kv_dim + kvh * head_dim;
  float* oh = out + (b * q_len + i0) * q_dim + h * head_dim;
  const uint8_t* valid = key_valid ? key_valid + b * kv_len : nullptr;
  // Under the block rule the last query of the block sees the most keys; later keys are not computed.
  const int64_t seen = visible_keys(q_offset + i0 + rows - 1, block, kv_len);
  const dnnl_dim_t n = seen, hd = head_dim;
  dnnl_sgemm('N', 'T', rows, n, hd, scale, qh, q_dim, kh, kv_dim, 0.0f, scores, n);
  for (int64_t i = 0; i < rows; ++i) {
    float* s = scores + i * seen;
    const int64_t visible = visible_keys(q_offset + i0 + i, block, seen);
    float max = neg_inf;
    for (int64_t j = 0; j < visible; ++j) {
      if (valid && !valid[j]) s[j] = neg_inf;
      max = std::max(max, s[j]);
    }
    if (max == neg_inf) {  // no valid key: zeros, as torch >= 2.5's safe softmax
      std::fill(s, s + seen, 0.0f);
      continue;
    }
    const float inv_sum = 1.0f / exp_shifted_sum(s, visible, max);
    for (int64_t j = 0; j < visible; ++j) s[j] *= inv_sum;
    std::fill(s + visible, s + seen, 0.0f);
  }
  dnnl_sgemm('N', 'N', rows, hd, n, 1.0f, scores, n, vh, kv_dim, 0.0f, oh, q_dim);
}

}  // namespace

void attention(const float* q, const float* k, const float* v, int64_t batch, int64_t q_len, int64_t kv_len,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, const uint8_t* key_valid, float* out,
               int64_t block, int64_t q_offset, float scale) {
  ScopedKernelTimer timer(KernelKind::kAttention);
  const int64_t q_blocks = (q_len + kQueryBlock - 1) / kQueryBlock;
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<size_t>(std::min(q_len, kQueryBlock) * kv_len));
    // nowait: the region's end joins the threads; a barrier before it would cost a second futex wake.
#pragma omp for collapse(3) schedule(static) nowait
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t qb = 0; qb < q_blocks; ++qb)
          attend(q, k, v, b, h, qb, q_len, kv_len, n_heads, n_kv_heads, head_dim, key_valid, out, block,
                 q_offset, scores.data(), scale);
  }
}

void attention_heads(const float* q, const float* k, const float* v, int64_t batch, int64_t q_len,
                     int64_t kv_len, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                     const uint8_t* key_valid, float* out, int64_t block, int64_t q_offset,
                     int64_t head_begin, int64_t head_end) {
  const int64_t q_blocks = (q_len + kQueryBlock - 1) / kQueryBlock;
  thread_local std::vector<float> scores;
  scores.resize(static_cast<size_t>(std::min(q_len, kQueryBlock) * kv_len));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = head_begin; h < head_end; ++h)
      for (int64_t qb = 0; qb < q_blocks; ++qb)
        attend(q, k, v, b, h, qb, q_len, kv_len, n_heads, n_kv_heads, head_dim, key_valid, out, block,
               q_offset, scores.data(), 0.0f);
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  ScopedKernelTimer timer(KernelKind::kActivation);
  constexpr int64_t kChunk = 4096;
  parallel_for_if(n > 65536, (n + kChunk - 1) / kChunk, [&](int64_t chunk) {
    const int64_t c = chunk * kChunk, end = std::min(n, c + kChunk);
    int64_t i = c;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= end; i += 8) {
      const __m256 g = _mm256_loadu_ps(gate + i);
      const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
      _mm256_storeu_ps(out + i,
                       _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
    }
    for (; i < end; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
  });
}

void add_bias(float* y, const float* bias, int64_t rows, int64_t n) {
  ScopedKernelTimer timer(KernelKind::kOther);
  for (int64_t r = 0; r < rows; ++r)
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[r * n + i] += bias[i];
}

}  // namespace dllm
