// f16 weights in a column-blocked layout, and the products on it: y[R, N] (+)= x[R, K] · W for one to four f32
// activation rows (token generation), and the layout that oneDNN's f32 matmul reads once widened (many rows).
//
// Written by hand because oneDNN 2.6 multiplies no f16 on CPUs, and the plain-row kernel (gemm_small_m) reads
// f16 rows at 70-75% of the memory bandwidth where a token must stream every weight once. The layout is
// oneDNN's f32 "BA16a64b" with f16 values: for W as [K, N], padded with zeros to N % 64 == 0 and K % 16 == 0,
// for each block of 64 columns (outer), for each k, the 64 columns' values. So
//   * a token's product streams each column block once, contiguously: per k, 64 values widened (vcvtph2ps)
//     and multiplied by the broadcast activation, four 16-lane accumulators per row;
//   * a panel of whole column blocks widened to f32 value for value is exactly the weight oneDNN's f32
//     brgemm matmul wants for those columns (no reorder inside each product, as a plain layout costs).
#pragma once

#include <cstdint>

namespace dllm {

constexpr int64_t kGemvF16MaxRows = 4;
constexpr int64_t kF16BlockColumns = 64;  // the layout's 64b
constexpr int64_t kF16BlockK = 16;        // the layout's 16a: K is padded to a multiple of it

// K as padded in the layout.
int64_t f16_blocked_k(int64_t k);

// AVX512F (cpuid; F16C is in the build's x86-64-v3 baseline).
bool gemv_f16_blocked_supported();

// Halves the blocked layout of an [n, k] weight takes: ceil(n / 64) blocks of f16_blocked_k(k) x 64.
int64_t f16_blocked_values(int64_t n, int64_t k);

// The row-major [n, k] f16 weight (PyTorch layout) into the blocked layout at `out` (f16_blocked_values
// halves; padding columns zero).
void f16_rows_to_blocked(const uint16_t* rows, int64_t n, int64_t k, uint16_t* out);

// The inverse: the blocked layout back to row-major [n, k] f16 rows (a device backend's copy of the weight).
void f16_blocked_to_rows(const uint16_t* blocked, int64_t n, int64_t k, uint16_t* rows);

// x: rows x k f32 activations, row-major. w: the blocked weight. y: rows x n f32, row-major; only its n real
// columns are written (added to when `accumulate`).
void gemv_f16_blocked(const float* x, int64_t rows, const uint16_t* w, int64_t n, int64_t k, float* y,
                      bool accumulate);
// Thread `thread` of `threads` (> 0) of a region the caller runs: its contiguous share of the column blocks,
// no parallel construct of its own. The same bits as gemv_f16_blocked for any split.
void gemv_f16_blocked_share(const float* x, int64_t rows, const uint16_t* w, int64_t n, int64_t k, float* y,
                            bool accumulate, int thread, int threads);

// Column blocks [first, first + count) widened to f32, value for value, at `out` (count * f16_blocked_k(k) * 64
// floats).
void f16_blocks_to_f32(const uint16_t* w, int64_t k, int64_t first, int64_t count, float* out);

}  // namespace dllm
