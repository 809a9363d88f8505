#include "kernels/gemm_small_m.h"

#include <immintrin.h>

#include "core/error.h"
#include "kernels/parallel.h"

namespace dllm {
namespace {

constexpr int kStrip = 3;  // weight rows per strip: the C of the 4 x 3 register tile

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
  static __m256 load8(const T* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float load1(const T* p) { return f16_to_f32(*p); }
};

// Dot products over all of k of R activation rows with C weight rows, added into y[r * n + c] (written when
// `overwrite`). R x C = 4 x 3 keeps 12 independent accumulator chains (two FMA pipes of latency 4 need at
// least 8) and 3 weight vectors + 1 activation vector: the 16 ymm registers. (A 6 x 2 tile, which widens
// 16-bit weights once per 6 rows instead of 4, measured 0.8-0.9x of this one.)
template <class W, int R, int C>
inline void tile(const float* x, int64_t k, const typename W::T* w, float* y, int64_t n, bool overwrite) {
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 wv[C];
    for (int c = 0; c < C; ++c) {
      wv[c] = W::load8(w + c * k + i);
      // Keep the weights in registers: left alone, GCC folds a load of them (or of the activations) into each
      // FMA, and 15-16 loads per 12 FMAs make the loop load-bound (measured 0.75x).
      __asm__("" : "+x"(wv[c]));
    }
    for (int r = 0; r < R; ++r) {
      __m256 xv = _mm256_loadu_ps(x + r * k + i);
      __asm__("" : "+x"(xv));  // likewise: one load of the activations, not one per weight row
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float s = hsum(acc[r][c]);
      for (int64_t j = i; j < k; ++j) s += x[r * k + j] * W::load1(w + c * k + j);
      float& out = y[r * n + c];
      out = overwrite ? s : out + s;
    }
}

// Every activation row against C (<= kStrip) weight rows starting at w, into y[:, 0..C). The first row tile
// streams the weights from memory; the others find them in L2.
template <class W, int C>
void strip(const float* x, int64_t rows, const typename W::T* w, int64_t n, int64_t k, float* y,
           bool overwrite) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) tile<W, 4, C>(x + r * k, k, w, y + r * n, n, overwrite);
  switch (rows - r) {
    case 3:
      tile<W, 3, C>(x + r * k, k, w, y + r * n, n, overwrite);
      break;
    case 2:
      tile<W, 2, C>(x + r * k, k, w, y + r * n, n, overwrite);
      break;
    case 1:
      tile<W, 1, C>(x + r * k, k, w, y + r * n, n, overwrite);
      break;
    default:
      break;
  }
}

// Each thread owns a contiguous range of strips (3 weight rows each) and walks them in order, each over the
// whole of K: the weights stream from memory once, sequentially (walking K-blocks across many rows instead
// measured 0.6-0.9x: more TLB misses and broken prefetch streams), and the activations are re-read from
// L1/L2.
template <class W>
void run(const float* x, int64_t rows, const void* w_raw, int64_t n, int64_t k, float* y, bool accumulate) {
  const auto* w = static_cast<const typename W::T*>(w_raw);
  const int64_t strips = n / kStrip;
  // Below ~1 MB of weights a thread sync costs more than the work.
  parallel_for_if(n * k >= (1 << 18), strips, [&](int64_t s) {
    strip<W, kStrip>(x, rows, w + s * kStrip * k, n, k, y + s * kStrip, !accumulate);
  });
  for (int64_t c = strips * kStrip; c < n; ++c) strip<W, 1>(x, rows, w + c * k, n, k, y + c, !accumulate);
}

// run's work for one thread of a region the caller runs: its contiguous range of the strips, and the last
// thread the tail columns. Every output is computed by the same tile as in run: the same bits.
template <class W>
void run_share(const float* x, int64_t rows, const void* w_raw, int64_t n, int64_t k, float* y, bool accumulate,
               int thread, int threads) {
  const auto* w = static_cast<const typename W::T*>(w_raw);
  const int64_t strips = n / kStrip;
  const int64_t s0 = strips * thread / threads, s1 = strips * (thread + 1) / threads;
  for (int64_t s = s0; s < s1; ++s) strip<W, kStrip>(x, rows, w + s * kStrip * k, n, k, y + s * kStrip, !accumulate);
  if (thread == threads - 1)
    for (int64_t c = strips * kStrip; c < n; ++c) strip<W, 1>(x, rows, w + c * k, n, k, y + c, !accumulate);
}

}  // namespace

void gemm_small_m(const float* x, int64_t rows, const void* w, DType w_type, int64_t n, int64_t k, float* y,
                  bool accumulate) {
  if (rows > kSmallMaxRows) fail("gemm_small_m: ", rows, " rows (at most ", kSmallMaxRows, ")");
  switch (w_type) {
    case DType::kF32:
      return run<F32W>(x, rows, w, n, k, y, accumulate);
    case DType::kBF16:
      return run<BF16W>(x, rows, w, n, k, y, accumulate);
    case DType::kF16:
      return run<F16W>(x, rows, w, n, k, y, accumulate);
  }
}

void gemm_small_m_share(const float* x, int64_t rows, const void* w, DType w_type, int64_t n, int64_t k, float* y,
                        bool accumulate, int thread, int threads) {
  if (rows > kSmallMaxRows) fail("gemm_small_m_share: ", rows, " rows (at most ", kSmallMaxRows, ")");
  if (threads <= 0 || thread < 0 || thread >= threads)
    fail("gemm_small_m_share: thread ", thread, " of ", threads);
  switch (w_type) {
    case DType::kF32:
      return run_share<F32W>(x, rows, w, n, k, y, accumulate, thread, threads);
    case DType::kBF16:
      return run_share<BF16W>(x, rows, w, n, k, y, accumulate, thread, threads);
    case DType::kF16:
      return run_share<F16W>(x, rows, w, n, k, y, accumulate, thread, threads);
  }
}

}  // namespace dllm
