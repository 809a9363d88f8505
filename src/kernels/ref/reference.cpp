#include "kernels/ref/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dllm::ref {

void matmul(const float* x, const float* w, int64_t m, int64_t n, int64_t k, float* y) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t t = 0; t < k; ++t) s += static_cast<double>(x[i * k + t]) * w[j * k + t];
      y[i * n + j] = static_cast<float>(s);
    }
}

void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
    const double scale = 1.0 / std::sqrt(ss / dim + eps);
    for (int64_t i = 0; i < dim; ++i) out[r * dim + i] = static_cast<float>(w[i] * (x[r * dim + i] * scale));
  }
}

void rope_neox(float* x, int64_t rows, int64_t n_heads, int64_t head_dim, const int64_t* positions, double theta,
               int64_t rotary_dim) {
  const int64_t rot = rotary_dim > 0 ? rotary_dim : head_dim, half = rot / 2;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (r * n_heads + h) * head_dim;
      for (int64_t j = 0; j < half; ++j) {
        const double angle = positions[r] / std::pow(theta, 2.0 * j / rot);
        const double a = v[j], b = v[j + half];
        v[j] = static_cast<float>(a * std::cos(angle) - b * std::sin(angle));
        v[j + half] = static_cast<float>(b * std::cos(angle) + a * std::sin(angle));
      }
    }
}

void attention(const float* q, const float* k, const float* v, int64_t batch, int64_t q_len, int64_t kv_len,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, const uint8_t* key_valid, float* out,
               int64_t block, int64_t q_offset) {
  const int64_t q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim, rep = n_heads / n_kv_heads;
  std::vector<double> s(static_cast<size_t>(kv_len));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < n_heads; ++h)
      for (int64_t i = 0; i < q_len; ++i) {
        const float* qi = q + (b * q_len + i) * q_dim + h * head_dim;
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < kv_len; ++j) {
          const bool hidden = block > 0 && j / block > (q_offset + i) / block;
          if (hidden || (key_valid && !key_valid[b * kv_len + j])) {
            s[j] = -std::numeric_limits<double>::infinity();
            continue;
          }
          const float* kj = k + (b * kv_len + j) * kv_dim + (h / rep) * head_dim;
          double d = 0;
          for (int64_t t = 0; t < head_dim; ++t) d += static_cast<double>(qi[t]) * kj[t];
          s[j] = d / std::sqrt(static_cast<double>(head_dim));
          max = std::max(max, s[j]);
        }
        float* o = out + (b * q_len + i) * q_dim + h * head_dim;
        if (std::isinf(max)) {
          std::fill(o, o + head_dim, 0.0f);
          continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < kv_len; ++j) sum += (s[j] = std::exp(s[j] - max));
        for (int64_t t = 0; t < head_dim; ++t) {
          double acc = 0;
          for (int64_t j = 0; j < kv_len; ++j) acc += s[j] * v[(b * kv_len + j) * kv_dim + (h / rep) * head_dim + t];
          o[t] = static_cast<float>(acc / sum);
        }
      }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

}  // namespace dllm::ref
