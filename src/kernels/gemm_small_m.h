// y[M, N] (+)= x[M, K] · Wᵀ for few activation rows (M <= kSmallMaxRows) and a row-major weight W[N, K]
// stored as f32, bf16 or f16 (converted to f32 in registers: the math is f32 in every case).
//
// Written by hand because both libraries are slow here: with one to a few dozen rows the product is bound by
// reading W once from memory, and OpenBLAS's sgemm (which packs W per call) and oneDNN 2.6's AVX2 gemm reach
// 2-22 GFLOP/s on a 152064 x 3584 head at M = 1-8, where streaming W at memory speed allows several times
// that (docs/performance.md). 16-bit weights halve the bytes streamed. Each thread takes a contiguous range
// of strips of 3 weight rows, each over the whole of K, four activation rows at a time (a 4 x 3 register
// tile).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace dllm {

// Up to here this kernel beats OpenBLAS sgemm on f32 weights (measured crossover 40-48 rows at 4096 x 4096;
// more so for 16-bit weights, which sgemm needs widened first).
constexpr int64_t kSmallMaxRows = 40;

void gemm_small_m(const float* x, int64_t rows, const void* w, DType w_type, int64_t n, int64_t k, float* y,
                  bool accumulate);

// gemm_small_m's work for thread `thread` of `threads` (> 0) of a parallel region the caller runs (a generated
// token's layers in one region): a contiguous share of the output columns, no parallel construct of its own.
// The same bits as gemm_small_m.
void gemm_small_m_share(const float* x, int64_t rows, const void* w, DType w_type, int64_t n, int64_t k, float* y,
                        bool accumulate, int thread, int threads);

}  // namespace dllm
