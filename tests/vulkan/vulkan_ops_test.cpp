// The Vulkan ops against the CPU's scalar references, on whatever Vulkan device the loader sees first
// (lavapipe in CI). No device: the tests skip saying so, unless DLLM_REQUIRE_VULKAN=1 (scripts/test.sh sets
// it), where that is a failure: CI must not pass by skipping them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <span>
#include <string>

#include "dllm/error.h"
#include "kernels/ref/reference.h"
#include "test_util.h"
#include "vulkan/buffer.h"
#include "vulkan/context.h"
#include "vulkan/ops.h"
#include "vulkan_test_util.h"

namespace dllm::vk {
namespace {

using test_util::device_copy;
using test_util::download;
using test_util::random_values;

TEST(Vulkan, DevicesDescribeThemselves) {
  NEED_DEVICE();
  const auto devices = list_devices();
  for (const DeviceInfo& d : devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.device_local_bytes, 0u) << d.name;
    EXPECT_GT(d.subgroup_size, 0u) << d.name;
  }
  Context ctx(0);
  EXPECT_EQ(ctx.info().name, devices[0].name);
  try {
    Context none(static_cast<int>(devices.size()));
    ADD_FAILURE() << "an out-of-range device index was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
}

// The f32 product against ref::matmul over ragged shapes, overwriting and accumulating, in both variants: no
// dimension a multiple of the tiled variant's 16 x 16 tile but the first's; for the registers variant's 32 x
// 128 workgroup tiles and K in chunks of 8: one row, rows and columns one past a workgroup's, three
// workgroups each way, K with and without a remainder.
TEST(Vulkan, MatmulF32MatchesTheReferenceInBothVariants) {
  NEED_DEVICE();
  Context ctx(0);
  for (MatmulVariant variant : test_util::kMatmulVariants) {
    SCOPED_TRACE(variant_name(variant));
    Ops ops(ctx, variant);
    ASSERT_EQ(ops.matmul_variant(), variant);
    int checked = 0;
    for (auto [m, n, k] : {std::tuple<uint32_t, uint32_t, uint32_t>{16, 64, 128},
                           {1, 33, 65},
                           {7, 100, 300},
                           {37, 129, 17},
                           {70, 300, 200}}) {
      SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k));
      const auto x = random_values(size_t{m} * k, 1.0f, m), w = random_values(size_t{n} * k, 0.05f, n);
      const auto base = random_values(size_t{m} * n, 1.0f, k);
      std::vector<float> want(size_t{m} * n);
      ref::matmul(x.data(), w.data(), m, n, k, want.data());
      Buffer bx = device_copy(ctx, x), bw = device_copy(ctx, w), by = device_copy(ctx, base);
      ops.matmul_f32(bx, bw, by, m, n, k, /*accumulate=*/false);
      std::vector<float> got(want.size());
      by.download(std::span<float>(got));
      EXPECT_LT(test::max_relative_error(got, want), 1e-5f);
      ops.matmul_f32(bx, bw, by, m, n, k, /*accumulate=*/true);  // base was overwritten: y = 2 · x·Wᵀ now
      by.download(std::span<float>(got));
      std::vector<float> twice = want;
      for (float& t : twice) t *= 2;
      EXPECT_LT(test::max_relative_error(got, twice), 1e-5f);  // no looser than 2e-5 of one product's scale
      ++checked;
    }
    EXPECT_EQ(checked, 5);
  }
}

// DLLM_VULKAN_MATMUL as the test sets it, back to what it was at the end of the scope.
class MatmulEnv {
 public:
  MatmulEnv() : had_(std::getenv("DLLM_VULKAN_MATMUL") != nullptr) {
    if (had_) before_ = std::getenv("DLLM_VULKAN_MATMUL");
  }
  ~MatmulEnv() { set(had_ ? before_.c_str() : nullptr); }
  MatmulEnv(const MatmulEnv&) = delete;
  MatmulEnv& operator=(const MatmulEnv&) = delete;
  void set(const char* value) {  // nullptr: unset
    if (value)
      setenv("DLLM_VULKAN_MATMUL", value, 1);
    else
      unsetenv("DLLM_VULKAN_MATMUL");
  }

 private:
  bool had_;
  std::string before_;
};

// Ops(ctx) runs the registers products on a CPU device that can (lavapipe: subgroups of 8 with
// subgroupBroadcast) and the tiled ones elsewhere; DLLM_VULKAN_MATMUL=tiled|registers overrides that, and
// another value is an error naming the variable and the value.
TEST(Vulkan, TheMatmulVariantFollowsTheDeviceUnlessDllmVulkanMatmulSaysOtherwise) {
  MatmulEnv env;
  env.set(nullptr);
  DeviceInfo cpu;
  cpu.cpu = true;
  cpu.subgroup_size = 8;
  cpu.subgroup_broadcast = true;
  DeviceInfo gpu = cpu;
  gpu.cpu = false;
  gpu.subgroup_size = 32;
  DeviceInfo narrow = cpu;  // llvmpipe on 128-bit vectors: subgroups of 4
  narrow.subgroup_size = 4;
  EXPECT_EQ(default_matmul_variant(cpu), MatmulVariant::kRegisters);
  EXPECT_EQ(default_matmul_variant(gpu), MatmulVariant::kTiled);
  EXPECT_EQ(default_matmul_variant(narrow), MatmulVariant::kTiled);
  env.set("tiled");
  EXPECT_EQ(default_matmul_variant(cpu), MatmulVariant::kTiled);
  env.set("registers");
  EXPECT_EQ(default_matmul_variant(gpu), MatmulVariant::kRegisters);
  env.set("shared");
  try {
    default_matmul_variant(cpu);
    ADD_FAILURE() << "DLLM_VULKAN_MATMUL=shared was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DLLM_VULKAN_MATMUL=shared"), std::string::npos) << e.what();
  }
  if (!test_util::have_device()) return;
  Context ctx(0);
  EXPECT_THROW(Ops ops(ctx), Error);
  env.set(nullptr);
  const DeviceInfo& d = ctx.info();
  const bool registers = d.cpu && d.subgroup_size >= 8 && d.subgroup_broadcast;
  EXPECT_EQ(Ops(ctx).matmul_variant(), registers ? MatmulVariant::kRegisters : MatmulVariant::kTiled)
      << d.name;
}

// Per row: argmax (the first on ties), the argmax's softmax probability, the margin to the second and
// Σ p·log(p + 1e-10), against the same quantities in double on the host (src/denoise/prediction.h's
// definitions).
TEST(Vulkan, TokenStatsMatchTheHostsDoubleReference) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  const uint32_t rows = 6, vocab = 1000;
  auto logits = random_values(size_t{rows} * vocab, 3.0f, 7);
  for (uint32_t v = 0; v < vocab; ++v) logits[4 * vocab + v] = (v == 321 || v == 777) ? 9.0f : 0.0f;  // a tie
  for (uint32_t v = 0; v < vocab; ++v)
    logits[5 * vocab + v] = v == 999 ? 40.0f : -40.0f;  // certain, at the end
  Buffer b = device_copy(ctx, logits);
  const TokenStats got = ops.token_stats(b, rows, vocab);
  ASSERT_EQ(got.argmax.size(), rows);
  for (uint32_t r = 0; r < rows; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    const float* x = logits.data() + size_t{r} * vocab;
    uint32_t best = 0;
    for (uint32_t v = 1; v < vocab; ++v)
      if (x[v] > x[best]) best = v;
    double m = x[best], sum = 0;
    for (uint32_t v = 0; v < vocab; ++v) sum += std::exp(double(x[v]) - m);
    std::vector<double> p(vocab);
    double second = 0, ent = 0;
    for (uint32_t v = 0; v < vocab; ++v) {
      p[v] = std::exp(double(x[v]) - m) / sum;
      if (v != best) second = std::max(second, p[v]);
      ent += p[v] * std::log(p[v] + 1e-10);
    }
    EXPECT_EQ(got.argmax[r], best);
    EXPECT_NEAR(got.p_max[r], p[best], 1e-5);
    EXPECT_NEAR(got.margin[r], p[best] - second, 1e-5);
    EXPECT_NEAR(got.neg_entropy[r], ent, 1e-4);
  }
  EXPECT_EQ(got.argmax[4], 321u);
  EXPECT_NEAR(got.margin[4], 0.0, 1e-7);
  EXPECT_EQ(got.argmax[5], 999u);
}

TEST(Vulkan, RmsNormAndSiluMulMatchTheReference) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  const uint32_t rows = 5, dim = 900;  // dim not a multiple of the 64-wide workgroup
  const auto x = random_values(size_t{rows} * dim, 2.0f, 1), w = random_values(dim, 1.0f, 2);
  std::vector<float> want(x.size());
  ref::rms_norm(x.data(), w.data(), rows, dim, 1e-6f, want.data());
  Buffer bx = device_copy(ctx, x), bw = device_copy(ctx, w), out(ctx, x.size() * sizeof(float));
  ops.rms_norm(bx, bw, out, rows, dim, 1e-6f);
  EXPECT_LT(test::max_relative_error(download(out, x.size()), want), 1e-5f);

  const uint32_t n = 1000;
  const auto gate = random_values(n, 3.0f, 3), up = random_values(n, 1.0f, 4);
  ref::silu_mul(gate.data(), up.data(), n, want.data());
  want.resize(n);
  Buffer bg = device_copy(ctx, gate), bu = device_copy(ctx, up), bo(ctx, n * sizeof(float));
  ops.silu_mul(bg, bu, bo, n);
  EXPECT_LT(test::max_relative_error(download(bo, n), want), 1e-5f);
}

// Full and partial rotation (LLaDA2's rotary_dim < head_dim), positions far out (angles from double tables).
TEST(Vulkan, RopeNeoxMatchesTheReference) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  const uint32_t rows = 6, heads = 3, head_dim = 64;
  const std::vector<int64_t> positions = {0, 1, 7, 100, 4095, 32000};
  int checked = 0;
  for (uint32_t rotary : {0u, 32u}) {
    auto x = random_values(size_t{rows} * heads * head_dim, 1.0f, 5 + rotary);
    std::vector<float> want = x;
    ref::rope_neox(want.data(), rows, heads, head_dim, positions.data(), 10000.0, rotary);
    Buffer bx = device_copy(ctx, x);
    ops.rope_neox(bx, rows, heads, head_dim, positions, 10000.0, rotary);
    EXPECT_LT(test::max_relative_error(download(bx, x.size()), want), 1e-5f) << "rotary_dim " << rotary;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// Bidirectional with padding (a batch row whose first keys are pad), grouped-query heads, and block-causal
// with a query offset (queries at 4..11 in blocks of 8: the first four see keys 0-7, the rest 0-15, none
// 16-23), against ref::attention.
TEST(Vulkan, AttentionMatchesTheReference) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  struct Case {
    uint32_t batch, q_len, kv_len, heads, kv_heads, head_dim, block, q_offset;
    bool padded;
  };
  int checked = 0;
  for (const Case c : {Case{2, 7, 7, 4, 2, 16, 0, 0, true}, Case{1, 8, 24, 6, 3, 32, 8, 4, false},
                       Case{1, 70, 70, 2, 1, 8, 0, 0, false}}) {
    SCOPED_TRACE("q_len " + std::to_string(c.q_len) + " kv_len " + std::to_string(c.kv_len));
    const auto q = random_values(size_t{c.batch} * c.q_len * c.heads * c.head_dim, 1.0f, 11);
    const auto k = random_values(size_t{c.batch} * c.kv_len * c.kv_heads * c.head_dim, 1.0f, 12);
    const auto v = random_values(k.size(), 1.0f, 13);
    std::vector<uint8_t> valid;
    if (c.padded) {
      valid.assign(size_t{c.batch} * c.kv_len, 1);
      valid[size_t{1} * c.kv_len + 0] = valid[size_t{1} * c.kv_len + 1] = 0;  // row 1: two pad keys
    }
    std::vector<float> want(q.size());
    ref::attention(q.data(), k.data(), v.data(), c.batch, c.q_len, c.kv_len, c.heads, c.kv_heads, c.head_dim,
                   valid.empty() ? nullptr : valid.data(), want.data(), c.block, c.q_offset);
    Buffer bq = device_copy(ctx, q), bk = device_copy(ctx, k), bv = device_copy(ctx, v);
    Buffer out(ctx, q.size() * sizeof(float));
    ops.attention(bq, bk, bv, valid, out, c.batch, c.q_len, c.kv_len, c.heads, c.kv_heads, c.head_dim,
                  c.block, c.q_offset);
    EXPECT_LT(test::max_relative_error(download(out, q.size()), want), 1e-5f);
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

TEST(Vulkan, ShapesThatDoNotFitTheBuffersAreErrors) {
  NEED_DEVICE();
  Context ctx(0);
  Ops ops(ctx);
  Buffer small(ctx, 16 * sizeof(float));
  try {
    ops.matmul_f32(small, small, small, 4, 4, 8, false);
    ADD_FAILURE() << "a product larger than its buffers ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul_f32 x"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Buffer(ctx, ctx.info().device_local_bytes + 1), Error);
}

}  // namespace
}  // namespace dllm::vk
