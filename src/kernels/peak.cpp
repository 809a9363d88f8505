#include "kernels/peak.h"

#include <immintrin.h>
#include <omp.h>

#include <chrono>

namespace dllm {

double measure_f32_fma_peak_gflops(double seconds) {
  constexpr int kChains = 12;  // enough independent FMAs to cover latency x ports
  constexpr int64_t kInner = 1 << 16;
  double total_flops = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
#pragma omp parallel reduction(+ : total_flops)
  {
    __m256 acc[kChains];
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(0.001f * c);
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
      for (int64_t i = 0; i < kInner; ++i)
        for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
      total_flops += 2.0 * 8 * kChains * kInner;
    }
    float sink = 0;
    for (int c = 0; c < kChains; ++c) sink += _mm256_cvtss_f32(acc[c]);
    if (sink == 12345.0f) total_flops += 1;  // keeps the loop alive
  }
  elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return total_flops / elapsed / 1e9;
}

}  // namespace dllm
