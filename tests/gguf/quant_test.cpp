// Block formats against ggml's reference layouts: hand-built blocks with known values dequantise to the
// values the layout defines (the expected values are computed here by an independent element -> byte
// mapping), and the quantisers round-trip within each format's error bound; our Q8_0 reproduces gguf-py's
// file bit for bit.
#include "kernels/quant/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/dtype.h"
#include "dllm/error.h"
#include "io/gguf.h"
#include "test_util.h"

namespace dllm {
namespace {

using namespace quant;

std::vector<float> random_weights(size_t n, uint32_t seed, float scale = 0.05f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  x[n / 3] = 8 * scale;  // an outlier, as real weights have
  return x;
}

std::vector<float> roundtrip(GgmlType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(ggml_row_bytes(t, static_cast<int64_t>(x.size())));
  quantize(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  std::vector<float> y(x.size());
  dequantize(t, q.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

double rel_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (x[i] - y[i]) * double(x[i] - y[i]);
    s += x[i] * double(x[i]);
  }
  return std::sqrt(e / s);
}

TEST(Quant, BlockSizesMatchGgml) {
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ8_0, 64), 68u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ4_0, 64), 36u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ4_K, 512), 288u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kQ6_K, 256), 210u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::kBF16, 3), 6u);
  EXPECT_THROW(ggml_row_bytes(GgmlType::kQ4_K, 128), Error);
}

TEST(Quant, Q8_0HandBuiltBlock) {
  uint8_t raw[34];
  const uint16_t d = f32_to_f16(0.5f);
  std::memcpy(raw, &d, 2);
  for (int j = 0; j < 32; ++j) raw[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 127));
  float y[32];
  dequantize(GgmlType::kQ8_0, raw, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 127) * 0.5f) << j;
}

TEST(Quant, Q4_0HandBuiltBlock) {
  uint8_t raw[18];
  const uint16_t d = f32_to_f16(0.25f);
  std::memcpy(raw, &d, 2);
  for (int j = 0; j < 16; ++j) raw[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize(GgmlType::kQ4_0, raw, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.25f);            // element j: low nibble of byte j
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.25f);  // element j + 16: high nibble of byte j
  }
}

TEST(Quant, Q4_KHandBuiltBlock) {
  // 6-bit scales and mins chosen to use the high bits of the packing (values >= 16 for sub-blocks 4..7).
  const uint8_t sc[8] = {1, 7, 33, 63, 17, 40, 5, 63}, mn[8] = {0, 9, 62, 3, 48, 1, 31, 20};
  BlockQ4_K b{};
  b.d = f32_to_f16(0.125f);
  b.dmin = f32_to_f16(0.0625f);
  // ggml-common.h: scales[0..3] low 6 bits = sc[0..3], scales[4..7] low 6 bits = mn[0..3]; scales[8..11] =
  // sc[4..7] low 4 bits | mn[4..7] low 4 bits << 4; the top 2 bits of sc[4..7] / mn[4..7] sit in bits 6-7 of
  // scales[0..7].
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    b.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  std::mt19937 rng(7);
  for (auto& q : b.qs) q = static_cast<uint8_t>(rng());
  for (int j = 0; j < 8; ++j) {
    uint8_t s, m;
    q4k_scale_min(j, b.scales, &s, &m);
    EXPECT_EQ(s, sc[j]);
    EXPECT_EQ(m, mn[j]);
  }
  float y[256];
  dequantize(GgmlType::kQ4_K, &b, y, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32;  // sub-block j: bytes 32*(j/2) .. +31, low nibble for even j
    const uint8_t byte = b.qs[32 * (j / 2) + l];
    const int q = j % 2 == 0 ? byte & 15 : byte >> 4;
    EXPECT_EQ(y[e], 0.125f * sc[j] * q - 0.0625f * mn[j]) << e;
  }
}

TEST(Quant, Q6_KHandBuiltBlock) {
  BlockQ6_K b{};
  std::mt19937 rng(11);
  for (auto& v : b.ql) v = static_cast<uint8_t>(rng());
  for (auto& v : b.qh) v = static_cast<uint8_t>(rng());
  for (auto& v : b.scales) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  b.d = f32_to_f16(0.01f);
  const float d = f16_to_f32(b.d);
  float y[256];
  dequantize(GgmlType::kQ6_K, &b, y, 256);
  for (int e = 0; e < 256; ++e) {
    // Element e: half h = e / 128; within it, quarter g = (e % 128) / 32 and lane l = e % 32. Low 4 bits: ql
    // byte 64h + l + 32*(g & 1), high nibble for g >= 2; high 2 bits: qh byte 32h + l, bits 2g..2g+1; scale
    // 8h + l/16 + 2g.
    const int h = e / 128, g = (e % 128) / 32, l = e % 32;
    const uint8_t lo_byte = b.ql[64 * h + l + 32 * (g & 1)];
    const int lo = g >= 2 ? lo_byte >> 4 : lo_byte & 15;
    const int hi = (b.qh[32 * h + l] >> (2 * g)) & 3;
    const int scale = b.scales[8 * h + l / 16 + 2 * g];
    EXPECT_EQ(y[e], d * scale * ((lo | (hi << 4)) - 32)) << e;
  }
}

TEST(Quant, ExactlyRepresentableValuesRoundTrip) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>((i * 37) % 255 - 127) * 0.5f;
  x[5] = 127 * 0.5f;
  x[40] = -127 * 0.5f;
  EXPECT_EQ(roundtrip(GgmlType::kQ8_0, x), x);
  std::vector<float> y(32);
  for (int i = 0; i < 32; ++i) y[i] = static_cast<float>(i % 16 - 8) * 0.25f;  // max |x| = -8 d: d = 0.25
  EXPECT_EQ(roundtrip(GgmlType::kQ4_0, y), y);
  std::vector<float> f(17, 1.5f);
  EXPECT_EQ(roundtrip(GgmlType::kF16, f), f);
  EXPECT_EQ(roundtrip(GgmlType::kBF16, f), f);
}

TEST(Quant, RoundTripErrorWithinEachFormatsBound) {
  const auto x = random_weights(4096, 3);
  // Per-element bound for the symmetric block formats: half a step of the block's scale (a whole step for
  // Q4_0, whose positive side stops at +7: +8 d clips), plus the f16 rounding of the stored scale.
  for (auto [t, block, levels, steps] :
       {std::tuple{GgmlType::kQ8_0, 32, 127.0f, 0.5f}, {GgmlType::kQ4_0, 32, 8.0f, 1.0f}}) {
    const auto y = roundtrip(t, x);
    for (size_t b = 0; b < x.size(); b += block) {
      float amax = 0;
      for (int j = 0; j < block; ++j) amax = std::max(amax, std::fabs(x[b + j]));
      const float step = amax / levels;
      for (int j = 0; j < block; ++j)
        ASSERT_LE(std::fabs(x[b + j] - y[b + j]), step * steps + amax * 1e-3f) << b + j;
    }
  }
  // Relative RMS error: what each format typically reaches on Gaussian weights (llama.cpp reports similar).
  EXPECT_LT(rel_rmse(x, roundtrip(GgmlType::kQ8_0, x)), 0.01);
  EXPECT_LT(rel_rmse(x, roundtrip(GgmlType::kQ6_K, x)), 0.04);
  EXPECT_LT(rel_rmse(x, roundtrip(GgmlType::kQ4_K, x)), 0.12);
  EXPECT_LT(rel_rmse(x, roundtrip(GgmlType::kQ4_0, x)), 0.15);
  EXPECT_LT(rel_rmse(x, roundtrip(GgmlType::kQ6_K, x)), rel_rmse(x, roundtrip(GgmlType::kQ4_K, x)));
  EXPECT_LT(rel_rmse(x, roundtrip(GgmlType::kQ4_K, x)), rel_rmse(x, roundtrip(GgmlType::kQ4_0, x)));
  // All-zero blocks stay zero (no division by zero).
  const std::vector<float> z(256, 0.0f);
  for (auto t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K})
    EXPECT_EQ(roundtrip(t, z), z);
}

TEST(Quant, Q8_0QuantiserReproducesGgufPyBitForBit) {
  GgufFile f32(test::data_path("gguf/llada_tiny_f32.gguf"));
  GgufFile q8(test::data_path("gguf/llada_tiny_q8_0.gguf"));
  int compared = 0;
  for (const auto& t : q8.tensors()) {
    if (t.type != GgmlType::kQ8_0) continue;
    const GgufTensor* src = f32.find_tensor(t.name);
    ASSERT_TRUE(src) << t.name;
    std::vector<float> x(static_cast<size_t>(src->numel()));
    std::memcpy(x.data(), src->data, x.size() * 4);
    std::vector<uint8_t> mine(t.nbytes);
    quantize(GgmlType::kQ8_0, x.data(), mine.data(), src->numel());
    EXPECT_EQ(std::memcmp(mine.data(), t.data, t.nbytes), 0) << t.name;
    ++compared;
  }
  EXPECT_EQ(compared, 23);
}

}  // namespace
}  // namespace dllm
