// Measures this machine's compute peak, so benchmarks can report "% of peak" from a number measured here.
#pragma once

namespace dllm {

// f32 FMA throughput over all OpenMP threads, in GFLOP/s (AVX2 FMA, independent accumulator chains).
double measure_f32_fma_peak_gflops(double seconds = 0.3);

}  // namespace dllm
