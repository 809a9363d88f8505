// Products the MatMul weights (y = x · Wᵀ) do not cover: a row vector times a table stored as [k, n] rows, as
// DiffusionGemma's self-conditioning takes softmax(logits) · E over its embedding table E [vocab, d] (the
// table is also the tied head, so it is used where it lies instead of keeping a transposed copy).
#pragma once

#include <cstdint>
#include <functional>

#include "core/dtype.h"

namespace dllm {

// out [m, n] = x [m, k] · table [k, n], the table in `dtype` (f32 multiplied where it lies; f16 / bf16
// widened to f32 a slab of rows at a time), f32 accumulation.
void rows_times_table(const float* x, int64_t m, int64_t k, const void* table, DType dtype, int64_t n,
                      float* out);

// The same with the table's rows given by `row(r, out)` (n values each): a table of quantized blocks.
void rows_times_rows(const float* x, int64_t m, int64_t k, const std::function<void(int64_t, float*)>& row,
                     int64_t n, float* out);

// out = gelu_tanh(gate) * up elementwise (PyTorch's gelu(approximate="tanh"), Gemma's gelu_pytorch_tanh), in
// f32. out may alias gate.
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);

}  // namespace dllm
