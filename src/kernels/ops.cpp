#include "kernels/ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/profile.h"
#include "kernels/simd_math.h"

namespace dllm {

namespace {

inline float dot(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float s = hsum256(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

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
#pragma omp parallel for schedule(static) if (rows * dim > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    double ss = 0;  // mean of squares accumulated in double: order-independent to f32 precision
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(dim)) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = w[i] * (xr[i] * scale);
  }
}

RopeTable::RopeTable(int64_t head_dim, float theta, int64_t max_positions) : half_(head_dim / 2), theta_(theta) {
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
    const float inv_freq = 1.0f / std::pow(theta_, exponent);
    for (int64_t p = positions_; p < max_positions; ++p) {
      const float angle = static_cast<float>(p) * inv_freq;
      cos_[p * half_ + j] = std::cos(angle);
      sin_[p * half_ + j] = std::sin(angle);
    }
  }
  positions_ = max_positions;
}

void rope_neox(float* x, int64_t rows, int64_t n_heads, const int64_t* positions, const RopeTable& table) {
  ScopedKernelTimer timer(KernelKind::kRope);
  const int64_t hd = table.head_dim(), half = hd / 2;
#pragma omp parallel for schedule(static) if (rows * n_heads * hd > 32768)
  for (int64_t r = 0; r < rows; ++r) {
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
  }
}

void attention(const float* q, const float* k, const float* v, int64_t batch, int64_t q_len, int64_t kv_len,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, const uint8_t* key_valid, float* out) {
  ScopedKernelTimer timer(KernelKind::kAttention);
  const int64_t q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim;
  const int64_t rep = n_heads / n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const float neg_inf = -std::numeric_limits<float>::infinity();
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<size_t>(kv_len));
#pragma omp for collapse(3) schedule(static)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t i = 0; i < q_len; ++i) {
          const int64_t kvh = h / rep;
          const float* qi = q + (b * q_len + i) * q_dim + h * head_dim;
          const float* kb = k + b * kv_len * kv_dim + kvh * head_dim;
          const float* vb = v + b * kv_len * kv_dim + kvh * head_dim;
          const uint8_t* valid = key_valid ? key_valid + b * kv_len : nullptr;
          float max = neg_inf;
          for (int64_t j = 0; j < kv_len; ++j) {
            scores[j] = (valid && !valid[j]) ? neg_inf : dot(qi, kb + j * kv_dim, head_dim) * scale;
            max = std::max(max, scores[j]);
          }
          float* o = out + (b * q_len + i) * q_dim + h * head_dim;
          std::fill(o, o + head_dim, 0.0f);
          if (max == neg_inf) continue;  // no valid key: zeros, as torch >= 2.5's safe softmax
          const float inv_sum = 1.0f / exp_shifted_sum(scores.data(), kv_len, max);
          for (int64_t j = 0; j < kv_len; ++j) {
            const float p = scores[j] * inv_sum;
            const float* vj = vb + j * kv_dim;
#pragma omp simd
            for (int64_t d = 0; d < head_dim; ++d) o[d] += p * vj[d];
          }
        }
  }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  ScopedKernelTimer timer(KernelKind::kActivation);
  constexpr int64_t kChunk = 4096;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t end = std::min(n, c + kChunk);
    int64_t i = c;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= end; i += 8) {
      const __m256 g = _mm256_loadu_ps(gate + i);
      const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
      _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
    }
    for (; i < end; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
  }
}

void add_bias(float* y, const float* bias, int64_t rows, int64_t n) {
  ScopedKernelTimer timer(KernelKind::kOther);
  for (int64_t r = 0; r < rows; ++r)
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[r * n + i] += bias[i];
}

}  // namespace dllm
