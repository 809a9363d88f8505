// Weights in the layouts the Vulkan products read (src/vulkan/shaders/matmul_*.comp), built on the host from
// what the files store, once at load.
#pragma once

#include <cstdint>
#include <vector>

namespace dllm::vk {

// f16 or bf16 rows W[n, k] (their 16-bit patterns) as matmul_f16 / matmul_bf16 read them: two to a uint32,
// each row padded to an even k with a zero, [n, (k + 1) / 2] uints. For an even k that is the rows' own bytes
// on a little-endian host (they may be uploaded as they are).
std::vector<uint32_t> pack_half_rows(const uint16_t* w, uint32_t n, uint32_t k);

// GGUF Q8_0 rows as matmul_q8_0 reads them: the block scales d in f32 [n, k / 32] and the int8 quants four to
// a uint32 [n, k / 4] (value 4i in the low byte).
struct PackedQ8_0 {
  std::vector<float> scales;
  std::vector<uint32_t> quants;
};
// `blocks`: n rows of k / 32 quant::BlockQ8_0 (34 bytes each, any alignment); k a multiple of 32.
PackedQ8_0 pack_q8_0(const void* blocks, uint32_t n, uint32_t k);

// GGUF Q4_K rows as matmul_q4_k reads them. Per 32-value sub-block the pair (d1, m1) = (d·sc, dmin·m) in f32
// [n, k / 32, 2], computed as ggml's dequantisation computes them (sc, m: get_scale_min_k4's 6-bit scale and
// min), and the 4-bit quants q in plain order, eight to a uint32 [n, k / 8] (value 8i + j in bits 4j to
// 4j + 3). Value d1·q - m1 is quant::dequantize's bit for bit: d1·q is exact in f32 (11 + 6 + 4 significant
// bits), so the one rounding is the subtraction's, fused or not.
struct PackedQ4_K {
  std::vector<float> scale_min;
  std::vector<uint32_t> quants;
};
// `blocks`: n rows of k / 256 quant::BlockQ4_K (144 bytes each, any alignment); k a multiple of 256.
PackedQ4_K pack_q4_k(const void* blocks, uint32_t n, uint32_t k);

}  // namespace dllm::vk
