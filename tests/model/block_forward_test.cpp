// LLaDA2 (MoE, fused QKV, QK-norm, partial RoPE) and SDAR (Qwen3 layout, QK-norm) forwards against the
// official PyTorch logits and hidden states (tests/data/oracle README §13-14), bidirectional and
// block-causal, and the exact block cache (CacheOp::kExtend): a block run against the cached earlier blocks
// equals the same rows of one full block-causal forward.
#include <gtest/gtest.h>

#include <cmath>

#include "cache/kv_cache.h"
#include "dllm/dllm.h"
#include "test_util.h"

namespace dllm {
namespace {

std::shared_ptr<Model> load(const std::string& name) {
  LoadOptions o;
  o.precision = Precision::kF32;
  o.backend = test::backend();
  auto m = Model::load(test::data_path("oracle/models/" + name), o);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error());
  return m.value();
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

nlohmann::json golden(const std::string& name) {
  return test::read_json(test::data_path("oracle/golden/" + name + "/forward.json"));
}

class BlockForward : public ::testing::TestWithParam<std::string> {};

TEST(BlockForwardInfo, Llada2FromConfig) {
  const auto model = load("llada2_tiny_f32");
  const ModelInfo& i = model->info();
  EXPECT_EQ(i.architecture, "llada2");
  EXPECT_EQ(i.n_heads, 4);
  EXPECT_EQ(i.n_kv_heads, 2);
  EXPECT_EQ(i.head_dim, 32);
  EXPECT_EQ(i.n_experts, 8);
  EXPECT_EQ(i.n_experts_used, 2);
  EXPECT_EQ(i.block_size, 32);
  EXPECT_EQ(i.pad_id, 500);
  EXPECT_EQ(i.mask_id, -1);  // no mask_token_id, no tokenizer.json, vocabulary below the official 156895
  EXPECT_FALSE(i.shift_logits);
}

TEST(BlockForwardInfo, SdarFromConfig) {
  const auto model = load("sdar_tiny_f32");
  const ModelInfo& i = model->info();
  EXPECT_EQ(i.architecture, "sdar");
  EXPECT_EQ(i.block_size, 4);
  EXPECT_EQ(i.mask_id, 476);
  EXPECT_EQ(i.eos_id, 450);
  EXPECT_EQ(i.eot_id, 451);  // generation_config.json eos_token_id [451, 450]
  EXPECT_EQ(i.n_experts, 0);
}

TEST_P(BlockForward, LogitsMatchGolden) {
  auto model = load(GetParam());
  const auto cases = golden(GetParam());
  int checked = 0;
  for (const auto& seq : cases["sequences"]) {
    const auto ids = seq["input_ids"].get<std::vector<int32_t>>();
    ForwardInput in;
    in.tokens = ids;
    if (seq.contains("block_length") && !seq["block_length"].is_null())
      in.attention_block = seq["block_length"].get<int64_t>();
    auto logits = model->forward(in).value();
    const std::string file = seq["logits_file"].get<std::string>();
    const auto expected = test::read_npy(test::data_path("oracle/" + file));
    ASSERT_EQ(logits.size(), expected.data.size());
    EXPECT_LT(max_abs_diff(logits.data(), expected.data.data(), logits.size()), 5e-4f) << file;
    const auto argmax = seq["argmax"].get<std::vector<int>>();
    const int64_t vocab = model->info().vocab_size;
    for (size_t t = 0; t < ids.size(); ++t) {
      const auto row = logits.begin() + t * vocab;
      EXPECT_EQ(std::max_element(row, row + vocab) - row, argmax[t]) << file << " position " << t;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST_P(BlockForward, HiddenStatesMatchGolden) {
  auto model = load(GetParam());
  const auto g = golden(GetParam());
  int checked = 0;
  for (const auto& seq : g["sequences"]) {
    if (!seq.contains("hidden_states_file")) continue;
    const auto ids = seq["input_ids"].get<std::vector<int32_t>>();
    std::vector<std::vector<float>> hidden;
    ForwardInput in;
    in.tokens = ids;
    if (seq.contains("block_length") && !seq["block_length"].is_null())
      in.attention_block = seq["block_length"].get<int64_t>();
    in.hidden_states = &hidden;
    ASSERT_TRUE(model->forward(in).ok());
    const auto expected =
        test::read_npy(test::data_path("oracle/" + seq["hidden_states_file"].get<std::string>()));
    ASSERT_EQ(static_cast<int64_t>(hidden.size()), expected.shape[0]);
    const size_t per = static_cast<size_t>(expected.shape[1] * expected.shape[2]);
    for (size_t l = 0; l < hidden.size(); ++l) {
      ASSERT_EQ(hidden[l].size(), per);
      EXPECT_LT(max_abs_diff(hidden[l].data(), expected.data.data() + l * per, per), 5e-4f) << "layer " << l;
    }
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

// The block cache: prefill blocks with kExtend (appending), then the next block against the cache, equal to
// the rows of one full block-causal forward. Also a prefill that appends only part of its tokens.
TEST_P(BlockForward, BlockCacheEqualsFullForward) {
  auto model = load(GetParam());
  const auto g = golden(GetParam());
  const auto& seq = g["sequences"][4];  // 64 tokens
  const auto ids = seq["input_ids"].get<std::vector<int32_t>>();
  const int64_t block = 8, V = model->info().vocab_size;
  ForwardInput full;
  full.tokens = ids;
  full.attention_block = block;
  const auto want = model->forward(full).value();

  KvCache cache;
  for (int64_t start = 0; start < 64; start += 16) {
    // Two blocks per call: logits of both, only the first block appended; then the second block appended by
    // itself (the commit forward), as a block loop does.
    ForwardInput in;
    in.tokens = std::span<const int32_t>(ids).subspan(start, 16);
    in.attention_block = block;
    in.cache = &cache;
    in.cache_op = CacheOp::kExtend;
    in.cache_append = block;
    const auto got = model->forward(in).value();
    EXPECT_EQ(cache.seq_len, start + block);
    EXPECT_LT(max_abs_diff(got.data(), want.data() + start * V, static_cast<size_t>(16 * V)), 1e-4f) << start;
    ForwardInput commit = in;
    commit.tokens = std::span<const int32_t>(ids).subspan(start + block, block);
    const auto again = model->forward(commit).value();
    EXPECT_EQ(cache.seq_len, start + 2 * block);
    EXPECT_LT(max_abs_diff(again.data(), want.data() + (start + block) * V, static_cast<size_t>(block * V)),
              1e-4f);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, BlockForward,
                         ::testing::Values("llada2_tiny_f32", "sdar_tiny_f32", "sdar_moe_tiny_f32"));

// SDAR's own cache check (README §13): prefill 0..15 storing K/V, then the block 16..19 with store_kv=False.
TEST(BlockForwardSdar, KvCacheCheckMatchesGolden) {
  auto model = load("sdar_tiny_f32");
  const auto g = golden("sdar_tiny_f32");
  const auto& check = g["kv_cache_check"];
  const auto ids = check["input_ids"].get<std::vector<int32_t>>();
  KvCache cache;
  ForwardInput prefill;
  prefill.tokens = std::span<const int32_t>(ids).subspan(0, 16);
  prefill.attention_block = 4;
  prefill.cache = &cache;
  prefill.cache_op = CacheOp::kExtend;
  prefill.cache_append = 16;
  ASSERT_TRUE(model->forward(prefill).ok());
  ForwardInput decode = prefill;
  decode.tokens = std::span<const int32_t>(ids).subspan(16, 4);
  decode.cache_append = 0;
  const auto logits = model->forward(decode).value();
  EXPECT_EQ(cache.seq_len, 16);  // store_kv=False leaves the cache as it was
  const auto expected = test::read_npy(test::data_path("oracle/" + check["logits_file"].get<std::string>()));
  ASSERT_EQ(logits.size(), expected.data.size());
  EXPECT_LT(max_abs_diff(logits.data(), expected.data.data(), logits.size()), 5e-4f);
}

}  // namespace
}  // namespace dllm
