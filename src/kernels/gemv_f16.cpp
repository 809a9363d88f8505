#include "kernels/gemv_f16.h"

#include <immintrin.h>
#include <omp.h>

#include <cstring>

#include "core/error.h"

namespace dllm {

bool gemv_f16_blocked_supported() {
  // F16C is in the build's baseline (x86-64-v3), and clang has no cpu-feature name for it.
  static const bool supported = __builtin_cpu_supports("avx512f");
  return supported;
}

int64_t f16_blocked_k(int64_t k) { return (k + kF16BlockK - 1) / kF16BlockK * kF16BlockK; }

int64_t f16_blocked_values(int64_t n, int64_t k) {
  return (n + kF16BlockColumns - 1) / kF16BlockColumns * f16_blocked_k(k) * kF16BlockColumns;
}

void f16_rows_to_blocked(const uint16_t* rows, int64_t n, int64_t k, uint16_t* out) {
  const int64_t blocks = (n + kF16BlockColumns - 1) / kF16BlockColumns;
  // Block by block (114 KiB at k = 896: the scattered writes stay in L2), each row read once, contiguously.
#pragma omp parallel for schedule(static) if (n * k >= (1 << 20))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t kp = f16_blocked_k(k);
    uint16_t* block = out + b * kp * kF16BlockColumns;
    const int64_t c_end = n - b * kF16BlockColumns < kF16BlockColumns ? n - b * kF16BlockColumns : kF16BlockColumns;
    if (c_end < kF16BlockColumns || kp > k) std::memset(block, 0, static_cast<size_t>(kp * kF16BlockColumns) * 2);
    for (int64_t c = 0; c < c_end; ++c) {
      const uint16_t* row = rows + (b * kF16BlockColumns + c) * k;
      for (int64_t i = 0; i < k; ++i) block[i * kF16BlockColumns + c] = row[i];
    }
  }
}

void f16_blocked_to_rows(const uint16_t* blocked, int64_t n, int64_t k, uint16_t* rows) {
  const int64_t kp = f16_blocked_k(k);
  for (int64_t r = 0; r < n; ++r) {
    const uint16_t* block = blocked + (r / kF16BlockColumns) * kp * kF16BlockColumns;
    const int64_t c = r % kF16BlockColumns;
    for (int64_t i = 0; i < k; ++i) rows[r * k + i] = block[i * kF16BlockColumns + c];
  }
}

namespace {

// Only called where cpuid says the CPU has AVX-512F. Internal linkage, no library templates instantiated
// here: nothing compiled for AVX-512 can be picked by the linker for the AVX2 paths.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,f16c,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,f16c,fma")
#endif

// 16 f16 values widened to f32. The zero-masked form: GCC 12's unmasked _mm512_cvtph_ps starts from an
// undefined vector that -Wmaybe-uninitialized reports.
inline __m512 widen16(const uint16_t* p) {
  return _mm512_maskz_cvtph_ps(static_cast<__mmask16>(0xffff),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Software prefetch this far ahead in the column block's stream (as gemv_bf16: 4 KiB).
constexpr int64_t kPrefetchValues = 2048;

// One column block: R activation rows against 64 columns over all of K, into y[r * n + c0 ..].
template <int R>
inline void column_block(const float* x, int64_t k, const uint16_t* w, float* y, int64_t n, int64_t c0,
                         bool accumulate) {
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    const uint16_t* q = w + i * kF16BlockColumns;
    _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchValues), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchValues + 32), _MM_HINT_T0);
    __m512 wv[4];
    for (int j = 0; j < 4; ++j)
      wv[j] = widen16(q + 16 * j);
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_set1_ps(x[r * k + i]);
      for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
  const int64_t valid = n - c0 < kF16BlockColumns ? n - c0 : kF16BlockColumns;
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) {
      const int64_t left = valid - 16 * j;
      if (left <= 0) break;
      const __mmask16 mask = left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1);
      float* out = y + r * n + c0 + 16 * j;
      __m512 v = acc[r][j];
      if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, out));
      _mm512_mask_storeu_ps(out, mask, v);
    }
}

template <int R>
void run_share(const float* x, const uint16_t* w, int64_t n, int64_t k, float* y, bool accumulate, int thread,
               int threads) {
  const int64_t blocks = (n + kF16BlockColumns - 1) / kF16BlockColumns;
  const int64_t block_values = kF16BlockColumns * f16_blocked_k(k);
  for (int64_t b = thread * blocks / threads; b < (thread + 1) * blocks / threads; ++b)
    column_block<R>(x, k, w + b * block_values, y, n, b * kF16BlockColumns, accumulate);
}

template <int R>
void run(const float* x, const uint16_t* w, int64_t n, int64_t k, float* y, bool accumulate) {
  const int64_t blocks = (n + kF16BlockColumns - 1) / kF16BlockColumns;
  // No parallel construct unless it runs in parallel (a team of one costs microseconds), and no library
  // template instantiated in this AVX-512 region (hence not parallel_for_if).
  if (blocks > 1 && !omp_in_parallel()) {
#pragma omp parallel
    run_share<R>(x, w, n, k, y, accumulate, omp_get_thread_num(), omp_get_num_threads());
    return;
  }
  run_share<R>(x, w, n, k, y, accumulate, 0, 1);
}

void widen(const uint16_t* w, int64_t values, float* out) {
  int64_t i = 0;
  for (; i + 16 <= values; i += 16)
    _mm512_storeu_ps(out + i, widen16(w + i));
  for (; i < values; ++i) out[i] = _cvtsh_ss(w[i]);
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

void check(const char* what, int64_t rows, int64_t k) {
  if (!gemv_f16_blocked_supported()) fail(what, ": this CPU has no AVX-512F");
  if (rows < 1 || rows > kGemvF16MaxRows) fail(what, ": ", rows, " rows (1 to ", kGemvF16MaxRows, ")");
  if (k < 1) fail(what, ": K ", k);
}

}  // namespace

void gemv_f16_blocked(const float* x, int64_t rows, const uint16_t* w, int64_t n, int64_t k, float* y,
                      bool accumulate) {
  check("gemv_f16_blocked", rows, k);
  using Run = void (*)(const float*, const uint16_t*, int64_t, int64_t, float*, bool);
  static constexpr Run kRun[] = {run<1>, run<2>, run<3>, run<4>};
  kRun[rows - 1](x, w, n, k, y, accumulate);
}

void gemv_f16_blocked_share(const float* x, int64_t rows, const uint16_t* w, int64_t n, int64_t k, float* y,
                            bool accumulate, int thread, int threads) {
  check("gemv_f16_blocked_share", rows, k);
  if (threads <= 0 || thread < 0 || thread >= threads)
    fail("gemv_f16_blocked_share: thread ", thread, " of ", threads);
  using Share = void (*)(const float*, const uint16_t*, int64_t, int64_t, float*, bool, int, int);
  static constexpr Share kShare[] = {run_share<1>, run_share<2>, run_share<3>, run_share<4>};
  kShare[rows - 1](x, w, n, k, y, accumulate, thread, threads);
}

void f16_blocks_to_f32(const uint16_t* w, int64_t k, int64_t first, int64_t count, float* out) {
  if (!gemv_f16_blocked_supported()) fail("f16_blocks_to_f32: this CPU has no AVX-512F");
  const int64_t block_values = f16_blocked_k(k) * kF16BlockColumns;
  // One block per item: 57 KiB of f16 at k = 896, widened into L2.
  const bool parallel = count > 1 && count * block_values >= (1 << 16) && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < count; ++b)
    widen(w + (first + b) * block_values, block_values, out + b * block_values);
}

}  // namespace dllm
