// ggml's tensor element types and block formats (ggml.h, ggml-common.h): what a GGUF file stores and what the
// quantized kernels read. In core/ because both io/ (the GGUF reader) and kernels/ (quant) need them.
// Block layouts:
//   Q8_0: 32 elements = f16 d, int8 qs[32];                     x = d * q
//   Q4_0: 32 elements = f16 d, u8 qs[16] (low nibble: 0..15, high: 16..31); x = d * (q - 8)
//   Q4_K: 256 elements = f16 d, f16 dmin, u8 scales[12] (8 x 6-bit scale + 6-bit min), u8 qs[128];
//         sub-block j of 32: x = d * sc_j * q - dmin * m_j, nibbles: low = elements 64k..64k+31, high = +32
//   Q6_K: 256 elements = u8 ql[128] (low 4 bits), u8 qh[64] (high 2 bits), int8 scales[16], f16 d;
//         sub-block of 16: x = d * scale * (q - 32)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace dllm {

// ggml_type ids as stored in tensor infos (ggml.h). Only the ones dllm reads have a GgmlTypeInfo.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ6_K = 14,
  kBF16 = 30,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // "Q8_0"
  int64_t block_elems;    // elements per block (1 for plain floats)
  size_t block_bytes;     // bytes per block
};

// The layout of a supported type, or nullptr (unknown or unsupported id).
const GgmlTypeInfo* ggml_type_info(uint32_t id);
// Every type dllm reads, for messages.
std::span<const GgmlTypeInfo> ggml_supported_types();
// ggml's name of any type id ("Q5_K", "IQ2_XXS", ...), or "" when the id is unknown to ggml.
std::string_view ggml_type_name(uint32_t id);
// Bytes of a row of n elements; throws when n is not a whole number of blocks.
size_t ggml_row_bytes(GgmlType type, int64_t n);

namespace quant {

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

}  // namespace quant

}  // namespace dllm
