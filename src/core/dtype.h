// Element types of stored tensors and the conversions between them.
#pragma once

#include <cstdint>
#include <cstring>
#include <immintrin.h>
#include <string_view>

namespace dllm {

enum class DType { kF32, kF16, kBF16 };

inline size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }

inline std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
  }
  return "?";
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as torch's .to(torch.bfloat16); NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t f32_to_f16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

// Converts n stored elements of type t to f32.
void convert_to_f32(DType t, const void* src, float* dst, size_t n);
// Converts n f32 values to bf16 (round to nearest even).
void convert_f32_to_bf16(const float* src, uint16_t* dst, size_t n);

}  // namespace dllm
