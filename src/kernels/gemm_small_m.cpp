#include "kernels/gemm_small_m.h"

#include <immintrin.h>

#include "core/error.h"

namespace dllm {
namespace {

constexpr int64_t kBlockK = 512;  // 4 weight rows x 512 (8 KB in f32) + 16 activation rows x 512 fit L1 + L2

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 8 weights as f32, and one weight as f32, for each storage type.
struct F32W {
  using T = float;
  static __m256 load8(const T* p) { return _mm256_loadu_ps(p); }
  static float load1(const T* p) { return *p; }
};
struct BF16W {
  using T = uint16_t;
  static __m256 load8(const T* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float load1(const T* p) { return bf16_to_f32(*p); }
};
struct F16W {
  using T = uint16_t;
  static __m256 load8(const T* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float load1(const T* p) { return f16_to_f32(*p); }
};

// Adds the dot products over k in [k0, k1) of R activation rows with C weight rows to part[r][c].
template <class W, int R, int C>
inline void tile(const float* x, int64_t k, const typename W::T* w, int64_t k0, int64_t k1, float (*part)[4]) {
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  int64_t i = k0;
  for (; i + 8 <= k1; i += 8) {
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = W::load8(w + c * k + i);
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + r * k + i);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float s = hsum(acc[r][c]);
      for (int64_t j = i; j < k1; ++j) s += x[r * k + j] * W::load1(w + c * k + j);
      part[r][c] += s;
    }
}

// All activation rows against C (<= 4) weight rows starting at w; writes y[:, 0..C).
template <class W, int C>
void strip(const float* x, int64_t rows, const typename W::T* w, int64_t n, int64_t k, float* y, bool accumulate) {
  float part[kSmallMaxRows][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kBlockK) {
    const int64_t k1 = k0 + kBlockK < k ? k0 + kBlockK : k;
    int64_t r = 0;
    for (; r + 2 <= rows; r += 2) tile<W, 2, C>(x + r * k, k, w, k0, k1, part + r);
    if (r < rows) tile<W, 1, C>(x + r * k, k, w, k0, k1, part + r);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < C; ++c) y[r * n + c] = accumulate ? y[r * n + c] + part[r][c] : part[r][c];
}

template <class W>
void run(const float* x, int64_t rows, const void* w_raw, int64_t n, int64_t k, float* y, bool accumulate) {
  const auto* w = static_cast<const typename W::T*>(w_raw);
  const int64_t strips = n / 4;
#pragma omp parallel for schedule(static) if (n * k >= (1 << 18))  // below ~1 MB of weights a thread sync costs more
  for (int64_t s = 0; s < strips; ++s) strip<W, 4>(x, rows, w + s * 4 * k, n, k, y + s * 4, accumulate);
  for (int64_t c = strips * 4; c < n; ++c) strip<W, 1>(x, rows, w + c * k, n, k, y + c, accumulate);
}

}  // namespace

void gemm_small_m(const float* x, int64_t rows, const void* w, DType w_type, int64_t n, int64_t k, float* y,
                  bool accumulate) {
  if (rows > kSmallMaxRows) fail("gemm_small_m: ", rows, " rows (at most ", kSmallMaxRows, ")");
  switch (w_type) {
    case DType::kF32: return run<F32W>(x, rows, w, n, k, y, accumulate);
    case DType::kBF16: return run<BF16W>(x, rows, w, n, k, y, accumulate);
    case DType::kF16: return run<F16W>(x, rows, w, n, k, y, accumulate);
  }
}

}  // namespace dllm
