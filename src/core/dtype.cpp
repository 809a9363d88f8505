#include "core/dtype.h"

namespace dllm {

void convert_to_f32(DType t, const void* src, float* dst, size_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
  }
}

void convert_f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

}  // namespace dllm
