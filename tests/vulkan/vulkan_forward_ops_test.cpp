// The ops a whole forward strings together on the device, against scalar references on ragged shapes: the
// products with f16, bf16, Q8_0 and Q4_K weights (against the dequantised weights' f32 product), the residual
// add, the bias, row masks, row gathers and weighted scatters, and RoPE and attention on the caller's
// buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_types.h"
#include "dllm/error.h"
#include "kernels/quant/quant.h"
#include "kernels/ref/reference.h"
#include "test_util.h"
#include "vulkan/ops.h"
#include "vulkan/pack.h"
#include "vulkan_test_util.h"

namespace dllm::vk {
namespace {

using test_util::device_copy;
using test_util::download;
using test_util::random_values;

using Shape = std::tuple<uint32_t, uint32_t, uint32_t>;  // m, n, k

// The product of x with 16-bit weights (f16 or bf16 by `to16` / `from16`), overwriting and accumulating,
// against ref::matmul of the weights rounded to 16 bits and back: the same numbers the shader multiplies. Odd
// k included (rows padded to an even k); the shapes of MatmulF32MatchesTheReferenceInBothVariants.
template <class To16, class From16, class Run>
int check_half_product(Context& ctx, To16 to16, From16 from16, Run run) {
  int checked = 0;
  for (auto [m, n, k] :
       {Shape{16, 64, 128}, Shape{1, 33, 65}, Shape{7, 100, 301}, Shape{37, 129, 17}, Shape{70, 300, 200}}) {
    SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k));
    const auto x = random_values(size_t{m} * k, 1.0f, m), w = random_values(size_t{n} * k, 0.05f, n);
    std::vector<uint16_t> w16(w.size());
    std::vector<float> rounded(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      w16[i] = to16(w[i]);
      rounded[i] = from16(w16[i]);
    }
    std::vector<float> want(size_t{m} * n);
    ref::matmul(x.data(), rounded.data(), m, n, k, want.data());
    Buffer bx = device_copy(ctx, x), bw = device_copy(ctx, pack_half_rows(w16.data(), n, k));
    Buffer by = device_copy(ctx, random_values(size_t{m} * n, 1.0f, k));
    run(bx, bw, by, m, n, k, /*accumulate=*/false);
    EXPECT_LT(test::max_relative_error(download(by, want.size()), want), 1e-5f);
    run(bx, bw, by, m, n, k, /*accumulate=*/true);
    for (float& t : want) t *= 2;
    EXPECT_LT(test::max_relative_error(download(by, want.size()), want), 1e-5f);
    ++checked;
  }
  return checked;
}

TEST(Vulkan, MatmulF16MatchesTheReferenceInBothVariants) {
  NEED_DEVICE();
  Context ctx(0);
  for (MatmulVariant variant : test_util::kMatmulVariants) {
    SCOPED_TRACE(variant_name(variant));
    Ops ops(ctx, variant);
    const int checked = check_half_product(
        ctx, [](float v) { return f32_to_f16(v); }, [](uint16_t h) { return f16_to_f32(h); },
        [&](auto&&... args) { ops.matmul_f16(args...); });
    EXPECT_EQ(checked, 5);
  }
}

TEST(Vulkan, MatmulBf16MatchesTheReferenceInBothVariants) {
  NEED_DEVICE();
  Context ctx(0);
  for (MatmulVariant variant : test_util::kMatmulVariants) {
    SCOPED_TRACE(variant_name(variant));
    Ops ops(ctx, variant);
    const int checked = check_half_product(
        ctx, [](float v) { return f32_to_bf16(v); }, [](uint16_t h) { return bf16_to_f32(h); },
        [&](auto&&... args) { ops.matmul_bf16(args...); });
    EXPECT_EQ(checked, 5);
  }
}

TEST(Vulkan, PackHalfRowsPadsEachRowToAnEvenLength) {
  const std::vector<uint16_t> w = {1, 2, 3, 4, 5, 6};  // [2, 3]
  EXPECT_EQ(pack_half_rows(w.data(), 2, 3), (std::vector<uint32_t>{0x00020001u, 0x3u, 0x00050004u, 0x6u}));
}

// Q8_0 blocks as a GGUF file holds them (quant::quantize, ggml's reference quantiser), packed by pack_q8_0,
// against ref::matmul of quant::dequantize's weights; negative quants included (sign extension in the
// shader), in both variants on the f32 test's kinds of shapes (K in whole blocks).
// w [n, k] quantised to `type` into `blocks`, and the reference x · dequantised(w)ᵀ [m, n] a product of those
// blocks must give.
std::vector<float> quantised_product(GgmlType type, const std::vector<float>& x, const std::vector<float>& w,
                                     uint32_t m, uint32_t n, uint32_t k, std::vector<std::byte>& blocks) {
  blocks.resize(ggml_row_bytes(type, int64_t{n} * k));
  quant::quantize(type, w.data(), blocks.data(), int64_t{n} * k);
  std::vector<float> dequantised(w.size());
  quant::dequantize(type, blocks.data(), dequantised.data(), int64_t{n} * k);
  std::vector<float> want(size_t{m} * n);
  ref::matmul(x.data(), dequantised.data(), m, n, k, want.data());
  return want;
}

TEST(Vulkan, MatmulQ8_0MatchesTheDequantisedReferenceInBothVariants) {
  NEED_DEVICE();
  Context ctx(0);
  for (MatmulVariant variant : test_util::kMatmulVariants) {
    SCOPED_TRACE(variant_name(variant));
    Ops ops(ctx, variant);
    int checked = 0;
    for (auto [m, n, k] :
         {Shape{16, 64, 128}, Shape{1, 33, 64}, Shape{7, 100, 96}, Shape{37, 129, 32}, Shape{70, 300, 224}}) {
      SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k));
      const auto x = random_values(size_t{m} * k, 1.0f, m), w = random_values(size_t{n} * k, 0.05f, n);
      std::vector<std::byte> blocks;
      std::vector<float> want = quantised_product(GgmlType::kQ8_0, x, w, m, n, k, blocks);
      const PackedQ8_0 packed = pack_q8_0(blocks.data(), n, k);
      ASSERT_EQ(packed.scales.size(), size_t{n} * k / 32);
      ASSERT_EQ(packed.quants.size(), size_t{n} * k / 4);
      Buffer bx = device_copy(ctx, x), bs = device_copy(ctx, packed.scales),
             bq = device_copy(ctx, packed.quants);
      Buffer by = device_copy(ctx, random_values(size_t{m} * n, 1.0f, k));
      ops.matmul_q8_0(bx, bs, bq, by, m, n, k, /*accumulate=*/false);
      EXPECT_LT(test::max_relative_error(download(by, want.size()), want), 1e-5f);
      ops.matmul_q8_0(bx, bs, bq, by, m, n, k, /*accumulate=*/true);
      for (float& t : want) t *= 2;
      EXPECT_LT(test::max_relative_error(download(by, want.size()), want), 1e-5f);
      ++checked;
    }
    EXPECT_EQ(checked, 5);
    Buffer small(ctx, 64 * sizeof(float));
    EXPECT_THROW(ops.matmul_q8_0(small, small, small, small, 1, 1, 48, false), Error);  // k not whole blocks
  }
}

// Q4_K rows packed by pack_q4_k give quant::dequantize's values exactly: d1·q - m1 from scale_min
// [n, k / 32, 2] and the nibbles of quants [n, k / 8] (value 8i + j in bits 4j to 4j + 3). Rows ggml's
// quantiser writes, and blocks of random bytes (every scale / min bit pattern, the six-bit packing's high
// bits included) with finite d and dmin; several super-blocks a row. A k that is not whole super-blocks is an
// error.
TEST(Vulkan, PackQ4_KGivesTheDequantisedValues) {
  for (bool random_bytes : {false, true}) {
    SCOPED_TRACE(random_bytes ? "random bytes" : "quantised rows");
    for (auto [n, k] : {std::pair<uint32_t, uint32_t>{1, 256}, {5, 512}, {13, 768}}) {
      SCOPED_TRACE(std::to_string(n) + " x " + std::to_string(k));
      const size_t count = size_t{n} * k;
      std::vector<std::byte> blocks(ggml_row_bytes(GgmlType::kQ4_K, static_cast<int64_t>(count)));
      ASSERT_EQ(blocks.size(), count / 256 * sizeof(quant::BlockQ4_K));
      if (random_bytes) {
        const auto noise = random_values(blocks.size(), 1000.0f, n + k);
        for (size_t i = 0; i < blocks.size(); ++i)
          blocks[i] = static_cast<std::byte>(static_cast<uint32_t>(static_cast<int64_t>(noise[i])) & 0xFF);
        const auto scales = random_values(2 * count / 256, 0.01f, k);
        for (size_t b = 0; b < count / 256; ++b) {
          quant::BlockQ4_K block;
          std::memcpy(&block, blocks.data() + b * sizeof(block), sizeof(block));
          block.d = f32_to_f16(scales[2 * b]);
          block.dmin = f32_to_f16(scales[2 * b + 1]);
          std::memcpy(blocks.data() + b * sizeof(block), &block, sizeof(block));
        }
      } else {
        const auto w = random_values(count, 0.05f, n * k);
        quant::quantize(GgmlType::kQ4_K, w.data(), blocks.data(), static_cast<int64_t>(count));
      }
      std::vector<float> want(count);
      quant::dequantize(GgmlType::kQ4_K, blocks.data(), want.data(), static_cast<int64_t>(count));
      const PackedQ4_K packed = pack_q4_k(blocks.data(), n, k);
      ASSERT_EQ(packed.scale_min.size(), count / 32 * 2);
      ASSERT_EQ(packed.quants.size(), count / 8);
      std::vector<float> got(count);
      for (size_t i = 0; i < count; ++i) {
        const float d1 = packed.scale_min[i / 32 * 2], m1 = packed.scale_min[i / 32 * 2 + 1];
        const uint32_t q = (packed.quants[i / 8] >> (4 * (i % 8))) & 0xFu;
        got[i] = d1 * static_cast<float>(q) - m1;
      }
      EXPECT_EQ(got, want);
    }
  }
  const std::vector<std::byte> blocks(2 * sizeof(quant::BlockQ4_K));
  EXPECT_THROW(pack_q4_k(blocks.data(), 1, 384), Error);  // k not whole super-blocks
  EXPECT_THROW(pack_q4_k(blocks.data(), 0, 256), Error);
}

// Q4_K blocks as a GGUF file holds them (quant::quantize, ggml's reference quantiser), packed by pack_q4_k,
// against ref::matmul of quant::dequantize's weights, in both variants on ragged m and n (K in whole
// super-blocks, one to three of them).
TEST(Vulkan, MatmulQ4_KMatchesTheDequantisedReferenceInBothVariants) {
  NEED_DEVICE();
  Context ctx(0);
  for (MatmulVariant variant : test_util::kMatmulVariants) {
    SCOPED_TRACE(variant_name(variant));
    Ops ops(ctx, variant);
    int checked = 0;
    for (auto [m, n, k] : {Shape{16, 64, 256}, Shape{1, 33, 256}, Shape{7, 100, 512}, Shape{37, 129, 256},
                           Shape{70, 300, 768}}) {
      SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k));
      const auto x = random_values(size_t{m} * k, 1.0f, m), w = random_values(size_t{n} * k, 0.05f, n);
      std::vector<std::byte> blocks;
      std::vector<float> want = quantised_product(GgmlType::kQ4_K, x, w, m, n, k, blocks);
      const PackedQ4_K packed = pack_q4_k(blocks.data(), n, k);
      ASSERT_EQ(packed.scale_min.size(), size_t{n} * k / 32 * 2);
      ASSERT_EQ(packed.quants.size(), size_t{n} * k / 8);
      Buffer bx = device_copy(ctx, x), bs = device_copy(ctx, packed.scale_min),
             bq = device_copy(ctx, packed.quants);
      Buffer by = device_copy(ctx, random_values(size_t{m} * n, 1.0f, k));
      ops.matmul_q4_k(bx, bs, bq, by, m, n, k, /*accumulate=*/false);
      EXPECT_LT(test::max_relative_error(download(by, want.size()), want), 1e-5f);
      ops.matmul_q4_k(bx, bs, bq, by, m, n, k, /*accumulate=*/true);
      for (float& t : want) t *= 2;
      EXPECT_LT(test::max_relative_error(download(by, want.size()), want), 1e-5f);
      ++checked;
    }
    EXPECT_EQ(checked, 5);
    Buffer small(ctx, 64 * sizeof(float)), big(ctx, 2048 * sizeof(float));
    EXPECT_THROW(ops.matmul_q4_k(small, small, small, small, 1, 1, 128, false), Error);  // k not whole blocks
    // 64 rows of 256: scale_min needs 64 x 8 pairs, 1024 floats; one a sub-block (512) is too few.
    Buffer half(ctx, 512 * sizeof(float));
    EXPECT_THROW(ops.matmul_q4_k(big, half, big, big, 1, 64, 256, false), Error);
  }
}

// x += y at a length not a multiple of the workgroup, and at one past 65535 workgroups of 256 (the second
// dimension of the dispatch).
TEST(Vulkan, AddMatchesTheReference) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  for (uint32_t n : {1000u, 65535u * 256u + 1000u}) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> x(n), y(n), want(n);
    for (uint32_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(i % 97) - 40.0f;
      y[i] = static_cast<float>(i % 89) * 0.25f;
      want[i] = x[i] + y[i];
    }
    Buffer bx = device_copy(ctx, x), by = device_copy(ctx, y);
    ops.add(bx, by, n);
    EXPECT_EQ(download(bx, n), want);
  }
}

TEST(Vulkan, AddBiasMatchesTheReference) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  const uint32_t rows = 5, cols = 900;
  auto x = random_values(size_t{rows} * cols, 1.0f, 21);
  const auto bias = random_values(cols, 1.0f, 22);
  Buffer bx = device_copy(ctx, x), bb = device_copy(ctx, bias);
  ops.add_bias(bx, bb, rows, cols);
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < cols; ++c) x[size_t{r} * cols + c] += bias[c];
  EXPECT_EQ(download(bx, x.size()), x);
}

TEST(Vulkan, ZeroRowsZeroesTheRowsNotKept) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  const uint32_t rows = 7, cols = 333;
  auto x = random_values(size_t{rows} * cols, 1.0f, 23);
  const std::vector<uint32_t> keep = {1, 0, 1, 1, 0, 0, 7};  // any nonzero keeps
  Buffer bx = device_copy(ctx, x), bk = device_copy(ctx, keep);
  ops.zero_rows(bx, bk, rows, cols);
  for (uint32_t r = 0; r < rows; ++r)
    if (keep[r] == 0)
      for (uint32_t c = 0; c < cols; ++c) x[size_t{r} * cols + c] = 0.0f;
  EXPECT_EQ(download(bx, x.size()), x);
}

// Repeated and out-of-order indices; one past src's rows gives a row of zeros.
TEST(Vulkan, GatherRowsMatchesTheReference) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  const uint32_t src_rows = 50, cols = 77;
  const auto src = random_values(size_t{src_rows} * cols, 1.0f, 24);
  const std::vector<uint32_t> index = {3, 49, 0, 3, 17, 50};
  const auto count = static_cast<uint32_t>(index.size());
  Buffer bs = device_copy(ctx, src), bi = device_copy(ctx, index),
         bd(ctx, size_t{count} * cols * sizeof(float));
  ops.gather_rows(bs, bi, bd, count, cols);
  std::vector<float> want(size_t{count} * cols, 0.0f);
  for (uint32_t i = 0; i < count; ++i)
    if (index[i] < src_rows)
      for (uint32_t c = 0; c < cols; ++c) want[size_t{i} * cols + c] = src[size_t{index[i]} * cols + c];
  EXPECT_EQ(download(bd, want.size()), want);
}

// Distinct, out-of-order indices (the op's contract); one past dst's rows is skipped.
TEST(Vulkan, ScatterAddWeightedMatchesTheReference) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  const uint32_t dst_rows = 20, cols = 77;
  auto dst = random_values(size_t{dst_rows} * cols, 1.0f, 25);
  const std::vector<uint32_t> index = {4, 0, 19, 7, 20};
  const auto count = static_cast<uint32_t>(index.size());
  const auto src = random_values(size_t{count} * cols, 1.0f, 26), weight = random_values(count, 1.0f, 27);
  Buffer bd = device_copy(ctx, dst), bs = device_copy(ctx, src), bi = device_copy(ctx, index);
  Buffer bw = device_copy(ctx, weight);
  ops.scatter_add_weighted(bd, bs, bi, bw, count, cols);
  for (uint32_t i = 0; i < count; ++i)
    if (index[i] < dst_rows)
      for (uint32_t c = 0; c < cols; ++c)
        dst[size_t{index[i]} * cols + c] += weight[i] * src[size_t{i} * cols + c];
  EXPECT_LT(test::max_relative_error(download(bd, dst.size()), dst), 1e-6f);
}

// The overload a forward uses: tables from rope_tables in the caller's buffers (partial rotation).
TEST(Vulkan, RopeNeoxOnTheCallersTablesMatchesTheReference) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  const uint32_t rows = 6, heads = 3, head_dim = 64, rotary = 32;
  const std::vector<int64_t> positions = {0, 1, 7, 100, 4095, 32000};
  auto x = random_values(size_t{rows} * heads * head_dim, 1.0f, 28);
  std::vector<float> want = x;
  ref::rope_neox(want.data(), rows, heads, head_dim, positions.data(), 10000.0, rotary);
  std::vector<float> cos, sin;
  rope_tables(positions, 10000.0, rotary, cos, sin);
  ASSERT_EQ(cos.size(), size_t{rows} * rotary / 2);
  Buffer bx = device_copy(ctx, x), bc = device_copy(ctx, cos), bs = device_copy(ctx, sin);
  ops.rope_neox(bx, rows, heads, head_dim, rotary / 2, bc, bs);
  EXPECT_LT(test::max_relative_error(download(bx, x.size()), want), 1e-5f);
}

// The overload a forward uses: the caller's valid mask and scores scratch, one scratch shared by two
// attentions of different shapes in one recording (padded bidirectional, then block-causal).
TEST(Vulkan, AttentionOnTheCallersBuffersMatchesTheReference) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  struct Case {
    uint32_t batch, q_len, kv_len, heads, kv_heads, head_dim, block, q_offset;
  };
  const Case cases[] = {{2, 7, 7, 4, 2, 16, 0, 0}, {1, 8, 24, 6, 3, 32, 8, 4}};
  size_t scratch_bytes = 0;
  for (const Case& c : cases)
    scratch_bytes =
        std::max(scratch_bytes, Ops::attention_scratch_bytes(c.batch, c.q_len, c.kv_len, c.heads));
  EXPECT_EQ(Ops::attention_scratch_bytes(2, 7, 7, 4), size_t{2} * 4 * 7 * 7 * sizeof(float));
  Buffer scratch(ctx, scratch_bytes);
  std::vector<Buffer> buffers;  // q, k, v, valid, out of each case, alive until the submit
  buffers.reserve(5 * std::size(cases));
  std::vector<std::vector<float>> wants;
  ops.begin();
  for (const Case& c : cases) {
    const auto q = random_values(size_t{c.batch} * c.q_len * c.heads * c.head_dim, 1.0f, 31 + c.q_len);
    const auto k = random_values(size_t{c.batch} * c.kv_len * c.kv_heads * c.head_dim, 1.0f, 32 + c.q_len);
    const auto v = random_values(k.size(), 1.0f, 33 + c.q_len);
    std::vector<uint8_t> valid(size_t{c.batch} * c.kv_len, 1);
    if (c.batch > 1) valid[c.kv_len] = valid[c.kv_len + 1] = 0;  // row 1: two pad keys
    std::vector<uint32_t> valid32(valid.begin(), valid.end());
    wants.emplace_back(q.size());
    ref::attention(q.data(), k.data(), v.data(), c.batch, c.q_len, c.kv_len, c.heads, c.kv_heads, c.head_dim,
                   valid.data(), wants.back().data(), c.block, c.q_offset);
    buffers.push_back(device_copy(ctx, q));
    buffers.push_back(device_copy(ctx, k));
    buffers.push_back(device_copy(ctx, v));
    buffers.push_back(device_copy(ctx, valid32));
    buffers.emplace_back(ctx, q.size() * sizeof(float));
    const size_t at = buffers.size() - 5;
    ops.attention(buffers[at], buffers[at + 1], buffers[at + 2], buffers[at + 3], scratch, buffers[at + 4],
                  c.batch, c.q_len, c.kv_len, c.heads, c.kv_heads, c.head_dim, c.block, c.q_offset);
  }
  ops.submit();
  for (size_t i = 0; i < wants.size(); ++i)
    EXPECT_LT(test::max_relative_error(download(buffers[5 * i + 4], wants[i].size()), wants[i]), 1e-5f)
        << "case " << i;
  Buffer small(ctx, 4);
  EXPECT_THROW(
      ops.attention(buffers[0], buffers[1], buffers[2], buffers[3], small, buffers[4], 2, 7, 7, 4, 2, 16),
      Error);  // a scratch too small
}

}  // namespace
}  // namespace dllm::vk
