// ggml's block formats (ggml-common.h), dequantisation and reference quantisers that follow ggml-quants.c's
// algorithms (quantize_row_*_ref), so a file written here matches what llama.cpp's tools would write.
//   Q8_0: 32 elements = f16 d, int8 qs[32];                     x = d * q
//   Q4_0: 32 elements = f16 d, u8 qs[16] (low nibble: 0..15, high: 16..31); x = d * (q - 8)
//   Q4_K: 256 elements = f16 d, f16 dmin, u8 scales[12] (8 x 6-bit scale + 6-bit min), u8 qs[128];
//         sub-block j of 32: x = d * sc_j * q - dmin * m_j, nibbles: low = elements 64k..64k+31, high = +32
//   Q6_K: 256 elements = u8 ql[128] (low 4 bits), u8 qh[64] (high 2 bits), int8 scales[16], f16 d;
//         sub-block of 16: x = d * scale * (q - 32)
#pragma once

#include <cstddef>
#include <cstdint>

#include "io/gguf.h"

namespace dllm::quant {

constexpr int64_t kQK8_0 = 32, kQK4_0 = 32, kQK_K = 256;

struct BlockQ8_0 {
  uint16_t d;  // f16
  int8_t qs[kQK8_0];
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ6_K) == 210);

// n elements of `type` (n a multiple of the block size) to f32. Any alignment of src.
void dequantize(GgmlType type, const void* src, float* dst, int64_t n);
// f32 to `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K); writes ggml_row_bytes(type, n) bytes.
void quantize(GgmlType type, const float* src, void* dst, int64_t n);

// Q4_K's packed 6-bit scale and min of sub-block j (0..7), as ggml's get_scale_min_k4.
void q4k_scale_min(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m);

}  // namespace dllm::quant
