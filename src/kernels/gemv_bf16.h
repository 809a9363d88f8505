// y[R, N] (+)= x[R, K] · W for one to four activation rows and a bf16 weight already in oneDNN's blocked
// layout BA16a64b2a, on AVX512_BF16 (vdpbf16ps).
//
// Written by hand because token generation multiplies one row at a time: the product is bound by reading W
// once from memory, and oneDNN 2.6's brgemm reads it at 27-45 GB/s on this machine's 0.5B model shapes where
// a plain stream reaches 52 GB/s (its per-call set-up costs most on the small q/k/v matrices). This kernel
// reads the very buffer oneDNN's matmul uses, so no second copy of the weights exists: 1.15-1.4x on those
// shapes, measured with cold weights (docs/performance.md, "Token generation").
//
// The layout, for W as [K, N] ("a" = K, "b" = N), padded to K % 32 == 0 and N % 64 == 0 with zeros: for each
// block of 64 columns (outer), for each block of 32 K (inner), 16 K-pairs x 64 columns x 2 values. One K-pair
// of 64 columns is four 64-byte vectors, each the second operand of a vdpbf16ps whose first is the pair of
// activations broadcast. A thread owns whole column blocks, each contiguous in memory.
#pragma once

#include <cstdint>

namespace dllm {

constexpr int64_t kGemvBf16MaxRows = 4;

// AVX512F + AVX512BW + AVX512_BF16 (cpuid).
bool gemv_bf16_blocked_supported();

// x: rows x k_padded bf16 activations, row-major, zero beyond the real K. w: the blocked weight (k_padded x
// n_padded). y: rows x n f32, row-major; only its n real columns are written (added to when `accumulate`).
void gemv_bf16_blocked(const uint16_t* x, int64_t rows, const uint16_t* w, int64_t n, int64_t k_padded,
                       float* y, bool accumulate);
// Thread `thread` of `threads` (> 0) of a region the caller runs: its contiguous share of the column blocks,
// on this thread (threads 0: all of them, as gemv_bf16_blocked). The same bits for any split.
void gemv_bf16_blocked_share(const uint16_t* x, int64_t rows, const uint16_t* w, int64_t n, int64_t k_padded,
                             float* y, bool accumulate, int thread, int threads);

}  // namespace dllm
