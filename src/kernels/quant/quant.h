// Dequantisation and reference quantisers that follow ggml-quants.c's algorithms (quantize_row_*_ref), so a file
// written here matches what llama.cpp's tools would write. The block formats are in core/ggml_types.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/ggml_types.h"

namespace dllm::quant {

// n elements of `type` (n a multiple of the block size) to f32. Any alignment of src.
void dequantize(GgmlType type, const void* src, float* dst, int64_t n);
// f32 to `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K); writes ggml_row_bytes(type, n) bytes.
void quantize(GgmlType type, const float* src, void* dst, int64_t n);

// Q4_K's packed 6-bit scale and min of sub-block j (0..7), as ggml's get_scale_min_k4.
void q4k_scale_min(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m);

}  // namespace dllm::quant
