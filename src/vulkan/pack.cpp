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

namespace {

// Q4_K's 6-bit scale and min of sub-block j (0..7) from the block's 12 packed bytes: ggml's get_scale_min_k4
// (quant::q4k_scale_min, which this layer does not see).
void scale_min_k4(uint32_t j, const uint8_t* q, uint32_t& sc, uint32_t& m) {
  if (j < 4) {
    sc = q[j] & 63u;
    m = q[j + 4] & 63u;
  } else {
    sc = (q[j + 4] & 0xFu) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

}  // namespace

PackedQ4_K pack_q4_k(const void* blocks, uint32_t n, uint32_t k) {
  constexpr uint32_t kBlock = quant::kQK_K, kSub = 32;
  if (n == 0 || k == 0 || k % kBlock != 0)
    fail("Vulkan pack_q4_k: ", n, " rows of ", k, " (k must be a multiple of 256)");
  const size_t nblocks = size_t{n} * (k / kBlock);
  PackedQ4_K out;
  out.scale_min.resize(nblocks * (kBlock / kSub) * 2);
  out.quants.resize(nblocks * (kBlock / 8));
  const auto* bytes = static_cast<const std::byte*>(blocks);
  for (size_t b = 0; b < nblocks; ++b) {
    quant::BlockQ4_K block;
    std::memcpy(&block, bytes + b * sizeof(block), sizeof(block));
    const float d = f16_to_f32(block.d), dmin = f16_to_f32(block.dmin);
    float* sm = out.scale_min.data() + b * (kBlock / kSub) * 2;
    for (uint32_t s = 0; s < kBlock / kSub; ++s) {
      uint32_t sc, m;
      scale_min_k4(s, block.scales, sc, m);
      sm[2 * s] = d * static_cast<float>(sc);
      sm[2 * s + 1] = dmin * static_cast<float>(m);
    }
    // Chunk j of 64 values: qs[32j + l]'s low nibble is value 64j + l, its high nibble value 64j + 32 + l.
    uint32_t* words = out.quants.data() + b * (kBlock / 8);
    for (uint32_t v = 0; v < kBlock; ++v) {
      const uint32_t j = v / 64, l = v % 32, high = (v % 64) / 32;
      const uint32_t q = (block.qs[32 * j + l] >> (4 * high)) & 0xFu;
      words[v / 8] |= q << (4 * (v % 8));
    }
  }
  return out;
}

}  // namespace dllm::vk
