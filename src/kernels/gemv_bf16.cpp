#include "kernels/gemv_bf16.h"

#include <immintrin.h>
#include <omp.h>

#include <cstring>

#include "core/error.h"

namespace dllm {

bool gemv_bf16_blocked_supported() {
  static const bool supported = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512bf16");
  return supported;
}

namespace {

constexpr int64_t kBlockColumns = 64;  // the layout's 64b
constexpr int64_t kPairValues = 2;     // the layout's 2a

// Only called where cpuid says the CPU has AVX512_BF16. Internal linkage, no library templates instantiated
// here: nothing compiled for AVX-512 can be picked by the linker for the AVX2 paths.
// (clang, for the libFuzzer build, spells GCC's target pragma as an attribute pushed on every function.)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512bf16"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512bf16")
#endif

// Software prefetch this far ahead in the column block's stream (4 KiB measured best of 1, 4 and 8 KiB; the
// hardware prefetcher alone left the 128-column k/v matrices at half the bandwidth).
constexpr int64_t kPrefetchValues = 2048;

// One column block: R activation rows against 64 columns over all of K, into y[r * n + c0 ..].
// A vector of 32 bf16 values from 512 bits (a plain reinterpretation: GCC's __m512bh has no cast intrinsic).
inline __m512bh as_bf16(__m512i v) {
  return (__m512bh)v;
}  // NOLINT(google-readability-casting)

template <int R>
inline void column_block(const uint16_t* x, int64_t k_padded, const uint16_t* w, float* y, int64_t n,
                         int64_t c0, bool accumulate) {
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  const int64_t pairs = k_padded / kPairValues;
  for (int64_t p = 0; p < pairs; ++p) {
    const uint16_t* q = w + p * kBlockColumns * kPairValues;
    for (int j = 0; j < 4; ++j)
      _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchValues + 32 * j), _MM_HINT_T0);
    __m512bh wv[4];
    for (int j = 0; j < 4; ++j) wv[j] = as_bf16(_mm512_loadu_si512(q + 32 * j));
    for (int r = 0; r < R; ++r) {
      uint32_t pair;
      std::memcpy(&pair, x + r * k_padded + p * kPairValues, sizeof(pair));
      const __m512bh xv = as_bf16(_mm512_set1_epi32(static_cast<int>(pair)));
      for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], xv, wv[j]);
    }
  }
  const int64_t valid = n - c0 < kBlockColumns ? n - c0 : kBlockColumns;
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

// Thread `thread` of `threads` runs its contiguous share of the column blocks, on this thread.
template <int R>
void run_share(const uint16_t* x, const uint16_t* w, int64_t n, int64_t k_padded, float* y, bool accumulate,
               int thread, int threads) {
  const int64_t blocks = (n + kBlockColumns - 1) / kBlockColumns;
  const int64_t block_values = kBlockColumns * k_padded;
  for (int64_t b = thread * blocks / threads; b < (thread + 1) * blocks / threads; ++b)
    column_block<R>(x, k_padded, w + b * block_values, y, n, b * kBlockColumns, accumulate);
}

template <int R>
void run(const uint16_t* x, const uint16_t* w, int64_t n, int64_t k_padded, float* y, bool accumulate) {
  const int64_t blocks = (n + kBlockColumns - 1) / kBlockColumns;
  // Not parallel_for_if: a library template must not be instantiated in this AVX-512 region. The same rule
  // though: no parallel construct (a team of one costs microseconds) unless it runs in parallel.
  if (blocks > 1 && !omp_in_parallel()) {
#pragma omp parallel
    run_share<R>(x, w, n, k_padded, y, accumulate, omp_get_thread_num(), omp_get_num_threads());
    return;
  }
  run_share<R>(x, w, n, k_padded, y, accumulate, 0, 1);
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

}  // namespace

void gemv_bf16_blocked(const uint16_t* x, int64_t rows, const uint16_t* w, int64_t n, int64_t k_padded,
                       float* y, bool accumulate) {
  gemv_bf16_blocked_share(x, rows, w, n, k_padded, y, accumulate, 0, 0);
}

void gemv_bf16_blocked_share(const uint16_t* x, int64_t rows, const uint16_t* w, int64_t n, int64_t k_padded,
                             float* y, bool accumulate, int thread, int threads) {
  if (!gemv_bf16_blocked_supported()) fail("gemv_bf16_blocked: this CPU has no AVX512_BF16");
  if (k_padded % 32 != 0) fail("gemv_bf16_blocked: K ", k_padded, " is not padded to 32");
  if (rows < 1 || rows > kGemvBf16MaxRows)
    fail("gemv_bf16_blocked: ", rows, " rows (1 to ", kGemvBf16MaxRows, ")");
  if (threads > 0 && (thread < 0 || thread >= threads))
    fail("gemv_bf16_blocked_share: thread ", thread, " of ", threads);
  using Run = void (*)(const uint16_t*, const uint16_t*, int64_t, int64_t, float*, bool);
  using Share = void (*)(const uint16_t*, const uint16_t*, int64_t, int64_t, float*, bool, int, int);
  static constexpr Run kRun[] = {run<1>, run<2>, run<3>, run<4>};
  static constexpr Share kShare[] = {run_share<1>, run_share<2>, run_share<3>, run_share<4>};
  if (threads == 0) return kRun[rows - 1](x, w, n, k_padded, y, accumulate);
  kShare[rows - 1](x, w, n, k_padded, y, accumulate, thread, threads);
}

}  // namespace dllm
