// Measures this machine's compute peak, so benchmarks can report "% of peak" from a number measured here.
#pragma once

namespace dllm {

// f32 FMA throughput over all OpenMP threads, in GFLOP/s (independent accumulator chains, with the widest FMA
// the CPU has: AVX-512 where cpuid says so, else AVX2).
double measure_f32_fma_peak_gflops(double seconds = 0.3);
// Which FMA measure_f32_fma_peak_gflops uses here: "AVX-512" or "AVX2".
const char* f32_fma_peak_isa();

// Int8 multiply-add throughput over all OpenMP threads, in GOP/s (2 ops per int8 product, as GFLOP/s counts
// an FMA): independent chains of the instruction the quantized kernels use, AVX512_VNNI vpdpbusd on 512-bit
// registers where cpuid says so (64 products each), else AVX2 vpmaddubsw + vpmaddwd + vpaddd (32 products);
// under the AMX_INT8 kernel set, tdpbssd on full 16 x 64 tiles (16384 products each).
double measure_int8_dot_peak_gops(double seconds = 0.3);
const char* int8_dot_peak_isa();  // "AMX_INT8", "AVX512_VNNI" or "AVX2"

// Where AMX-BF16 runs (kernels/amx.h amx_bf16_usable), oneDNN's bf16 matmuls run on it
// (brg:avx512_core_amx_bf16), so the bf16 peak is its tdpbf16ps throughput, not twice the f32 FMA's:
// tdpbf16ps on full tiles over all OpenMP threads, in GFLOP/s; 0 where AMX-BF16 cannot run.
double measure_amx_bf16_peak_gflops(double seconds = 0.3);

// Memory read bandwidth over all OpenMP threads, in GB/s: every thread sums its part of a buffer far larger
// than the caches (1 GiB), pass after pass for `seconds` (at least 3 passes); the median pass's rate. What a
// matmul streaming its weights from memory can reach.
double measure_memory_read_gbs(double seconds = 0.5);

}  // namespace dllm
