#include "kernels/quant/linear_q8.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/quant/quant.h"

namespace dllm::quant {

namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sum over 32 lanes of w * x as 8 int32 partial sums. |w| <= 127 and |x| <= 127, so the pairwise int16 sums of
// vpmaddubsw (|w| * sign(x, w)) stay below 2 * 127 * 127 = 32258: no saturation.
inline __m256 dot32(__m256i w, __m256i x) {
  const __m256i aw = _mm256_sign_epi8(w, w);
  const __m256i sx = _mm256_sign_epi8(x, w);
  const __m256i p16 = _mm256_maddubs_epi16(aw, sx);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

}  // namespace

void quantize_activations_q8(const float* x, int64_t rows, int64_t k, int8_t* qs, float* d) {
  const int64_t nb = k / kQK8_0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + r * k + b * kQK8_0;
      float amax = 0;
      for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(xb[j]));
      // The scale is kept in f32 (ggml rounds it to f16; f32 is at least as accurate).
      const float scale = amax / 127.0f, inv = scale != 0 ? 1.0f / scale : 0.0f;
      d[r * nb + b] = scale;
      for (int j = 0; j < kQK8_0; ++j) qs[r * k + b * kQK8_0 + j] = static_cast<int8_t>(std::lrintf(xb[j] * inv));
    }
}

LinearQ8 LinearQ8::from_q8_0(const void* blocks, int64_t out, int64_t in) {
  if (in % kQK8_0 != 0) fail("LinearQ8: in_features ", in, " is not a multiple of 32");
  LinearQ8 l;
  l.out_ = out;
  l.in_ = in;
  l.nb_ = in / kQK8_0;
  l.qs_.resize(static_cast<size_t>(out * in));
  l.d_.resize(static_cast<size_t>(out * l.nb_));
  const auto* src = static_cast<const uint8_t*>(blocks);
  for (int64_t i = 0; i < out * l.nb_; ++i) {
    BlockQ8_0 b;
    std::memcpy(&b, src + i * sizeof(BlockQ8_0), sizeof(b));
    l.d_[i] = f16_to_f32(b.d);
    std::memcpy(l.qs_.data() + i * kQK8_0, b.qs, kQK8_0);
  }
  return l;
}

LinearQ8 LinearQ8::from_f32(const float* w, int64_t out, int64_t in) {
  std::vector<uint8_t> blocks(ggml_row_bytes(GgmlType::kQ8_0, in) * static_cast<size_t>(out));
  quantize(GgmlType::kQ8_0, w, blocks.data(), out * in);
  return from_q8_0(blocks.data(), out, in);
}

void LinearQ8::forward_reference(const float* x, int64_t rows, float* y) const {
  std::vector<int8_t> xq(static_cast<size_t>(rows * in_));
  std::vector<float> xd(static_cast<size_t>(rows * nb_));
  quantize_activations_q8(x, rows, in_, xq.data(), xd.data());
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t n = 0; n < out_; ++n) {
      float acc = 0;
      for (int64_t b = 0; b < nb_; ++b) {
        int32_t s = 0;
        for (int j = 0; j < kQK8_0; ++j)
          s += int32_t{qs_[n * in_ + b * kQK8_0 + j]} * int32_t{xq[m * in_ + b * kQK8_0 + j]};
        acc += static_cast<float>(s) * (d_[n * nb_ + b] * xd[m * nb_ + b]);
      }
      y[m * out_ + n] = acc;
    }
}

void LinearQ8::forward(const float* x, int64_t rows, float* y, bool accumulate) const {
  if (rows <= 0) return;
  std::vector<int8_t> xq(static_cast<size_t>(rows * in_));
  std::vector<float> xd(static_cast<size_t>(rows * nb_));
  quantize_activations_q8(x, rows, in_, xq.data(), xd.data());
  constexpr int64_t kRowTile = 4, kColChunk = 16;
  const int64_t chunks = (out_ + kColChunk - 1) / kColChunk;
  // Each thread owns chunks of 16 weight rows (kept in L2) and runs every 4-row tile of x (in L1) against them.
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t n0 = c * kColChunk, n1 = std::min(out_, n0 + kColChunk);
    for (int64_t m0 = 0; m0 < rows; m0 += kRowTile) {
      const int64_t mt = std::min(kRowTile, rows - m0);
      for (int64_t n = n0; n < n1; ++n) {
        const int8_t* w = qs_.data() + n * in_;
        const float* wd = d_.data() + n * nb_;
        __m256 acc[kRowTile] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        if (mt == kRowTile) {
          const int8_t* x0 = xq.data() + m0 * in_;
          const float* d0 = xd.data() + m0 * nb_;
          for (int64_t b = 0; b < nb_; ++b) {
            const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + b * kQK8_0));
            for (int r = 0; r < kRowTile; ++r) {
              const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0 + r * in_ + b * kQK8_0));
              acc[r] = _mm256_fmadd_ps(dot32(wv, xv), _mm256_set1_ps(wd[b] * d0[r * nb_ + b]), acc[r]);
            }
          }
        } else {
          for (int64_t r = 0; r < mt; ++r) {
            const int8_t* xr = xq.data() + (m0 + r) * in_;
            const float* dr = xd.data() + (m0 + r) * nb_;
            for (int64_t b = 0; b < nb_; ++b) {
              const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + b * kQK8_0));
              const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr + b * kQK8_0));
              acc[r] = _mm256_fmadd_ps(dot32(wv, xv), _mm256_set1_ps(wd[b] * dr[b]), acc[r]);
            }
          }
        }
        for (int64_t r = 0; r < mt; ++r) {
          float& out = y[(m0 + r) * out_ + n];
          out = accumulate ? out + hsum(acc[r]) : hsum(acc[r]);
        }
      }
    }
  }
}

}  // namespace dllm::quant
