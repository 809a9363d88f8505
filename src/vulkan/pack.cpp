#include "vulkan/pack.h"

#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "core/ggml_types.h"

namespace dllm::vk {

std::vector<uint32_t> pack_half_rows(const uint16_t* w, uint32_t n, uint32_t k) {
  if (n == 0 || k == 0) fail("Vulkan pack_half_rows: ", n, " rows of ", k);
  const size_t stride = (size_t{k} + 1) / 2;
  std::vector<uint32_t> out(size_t{n} * stride, 0u);
  for (size_t r = 0; r < n; ++r)
    for (size_t c = 0; c < k; ++c) out[r * stride + c / 2] |= uint32_t{w[r * k + c]} << (c % 2 == 0 ? 0 : 16);
  return out;
}

PackedQ8_0 pack_q8_0(const void* blocks, uint32_t n, uint32_t k) {
  constexpr uint32_t kBlock = quant::kQK8_0;
  if (n == 0 || k == 0 || k % kBlock != 0)
    fail("Vulkan pack_q8_0: ", n, " rows of ", k, " (k must be a multiple of 32)");
  const size_t nblocks = size_t{n} * (k / kBlock);
  PackedQ8_0 out;
  out.scales.resize(nblocks);
  out.quants.resize(nblocks * (kBlock / 4));
  const auto* bytes = static_cast<const std::byte*>(blocks);
  for (size_t b = 0; b < nblocks; ++b) {
    quant::BlockQ8_0 block;
    std::memcpy(&block, bytes + b * sizeof(block), sizeof(block));
    out.scales[b] = f16_to_f32(block.d);
    for (uint32_t j = 0; j < kBlock / 4; ++j) {
      uint32_t word = 0;
      for (uint32_t i = 0; i < 4; ++i) word |= uint32_t{static_cast<uint8_t>(block.qs[4 * j + i])} << (8 * i);
      out.quants[b * (kBlock / 4) + j] = word;
    }
  }
  return out;
}

}  // namespace dllm::vk
