// Dream forward pass against the official PyTorch logits and hidden states (tests/data/oracle, README §4), Dream's
// padding semantics (mask valid_i AND valid_j, position ids cumsum-1) and the KV-cache forward.
#include <gtest/gtest.h>

#include <cmath>

#include "cache/kv_cache.h"
#include "dllm/dllm.h"
#include "test_util.h"

namespace dllm {
namespace {

std::shared_ptr<Model> dream(Precision compute = Precision::kF32) {
  LoadOptions o;
  o.precision = compute;
  o.backend = test::backend();
  auto m = Model::load(test::data_path("oracle/models/dream_tiny_gqa_f32"), o);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error());
  return m.value();
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

nlohmann::json golden() { return test::read_json(test::data_path("oracle/golden/dream_tiny_gqa_f32/forward.json")); }

TEST(DreamForward, InfoFromConfig) {
  const auto model = dream();  // keeps the model alive while its info is read
  const ModelInfo& i = model->info();
  EXPECT_EQ(i.architecture, "dream");
  EXPECT_EQ(i.n_heads, 4);
  EXPECT_EQ(i.n_kv_heads, 2);
  EXPECT_EQ(i.head_dim, 32);
  EXPECT_EQ(i.ffn_hidden, 672);
  EXPECT_EQ(i.mask_id, 473);
  EXPECT_EQ(i.eos_id, 450);
  EXPECT_EQ(i.pad_id, 450);
  EXPECT_TRUE(i.shift_logits);
}

TEST(DreamForward, LogitsMatchGoldenF32) {
  auto model = dream();
  const auto cases = golden();  // a range-for over golden()["..."] would iterate a destroyed temporary
  for (const auto& seq : cases["sequences"]) {
    const auto ids = seq["input_ids"].get<std::vector<int32_t>>();
    ForwardInput in;
    in.tokens = ids;
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
  }
}

TEST(DreamForward, HiddenStatesMatchGolden) {
  auto model = dream();
  const auto g = golden();
  const auto& seq = g["sequences"][1];
  const auto ids = seq["input_ids"].get<std::vector<int32_t>>();
  std::vector<std::vector<float>> hidden;
  ForwardInput in;
  in.tokens = ids;
  in.hidden_states = &hidden;
  ASSERT_TRUE(model->forward(in).ok());
  const auto expected = test::read_npy(test::data_path("oracle/" + seq["hidden_states_file"].get<std::string>()));
  ASSERT_EQ(static_cast<int64_t>(hidden.size()), expected.shape[0]);
  const size_t per = static_cast<size_t>(expected.shape[1] * expected.shape[2]);
  for (size_t l = 0; l < hidden.size(); ++l) {
    float scale = 0;
    for (size_t i = 0; i < per; ++i) scale = std::max(scale, std::abs(expected.data[l * per + i]));
    ASSERT_EQ(hidden[l].size(), per);
    EXPECT_LT(max_abs_diff(hidden[l].data(), expected.data.data() + l * per, per), 3e-5f * scale) << "layer " << l;
  }
}

// A left-padded row with Dream's mask and position ids gives the unpadded row's logits at the valid positions.
TEST(DreamForward, PaddingIsInvisibleToValidTokens) {
  auto model = dream();
  const auto ids = golden()["sequences"][1]["input_ids"].get<std::vector<int32_t>>();
  ForwardInput plain;
  plain.tokens = ids;
  const auto want = model->forward(plain).value();

  const int64_t pad = 5, len = static_cast<int64_t>(ids.size()) + pad, vocab = model->info().vocab_size;
  std::vector<int32_t> tokens(pad, model->info().pad_id);
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  std::vector<uint8_t> valid(len, 1);
  std::vector<int64_t> pos(len);
  for (int64_t i = 0; i < len; ++i) {
    valid[i] = i >= pad;
    pos[i] = i >= pad ? i - pad : 1;  // cumsum(mask) - 1, pads at 1
  }
  ForwardInput padded;
  padded.tokens = tokens;
  padded.positions = pos;
  padded.valid = valid;
  const auto got = model->forward(padded).value();
  EXPECT_LT(max_abs_diff(got.data() + pad * vocab, want.data(), want.size()), 1e-4f);

  // Without the mask the pads leak into every position: the test can fail.
  ForwardInput leaky;
  leaky.tokens = tokens;
  leaky.positions = pos;
  const auto leak = model->forward(leaky).value();
  EXPECT_GT(max_abs_diff(leak.data() + pad * vocab, want.data(), want.size()), 1e-2f);
}

// A stored cache reused for a sub-range with unchanged tokens reproduces the full forward; changed tokens in the
// range are seen by the range's queries.
TEST(DreamForward, CacheReuseOfARangeIsExactWhenNothingElseChanged) {
  auto model = dream();
  auto ids = golden()["sequences"][2]["input_ids"].get<std::vector<int32_t>>();
  const int64_t vocab = model->info().vocab_size, seq = static_cast<int64_t>(ids.size());
  KvCache cache;
  ForwardInput store;
  store.tokens = ids;
  store.cache = &cache;
  store.cache_op = CacheOp::kStore;
  const auto full = model->forward(store).value();
  EXPECT_EQ(cache.seq_len, seq);

  const int64_t from = 20, to = 36;
  std::span<const int32_t> range(ids.data() + from, to - from);
  ForwardInput reuse;
  reuse.tokens = range;
  reuse.cache = &cache;
  reuse.cache_op = CacheOp::kReuse;
  reuse.cache_offset = from;
  const auto part = model->forward(reuse).value();
  ASSERT_EQ(static_cast<int64_t>(part.size()), (to - from) * vocab);
  EXPECT_LT(max_abs_diff(part.data(), full.data() + from * vocab, part.size()), 1e-4f);

  // Change one token inside the range: with the rest of the cache fixed, the result is the exact forward of the
  // changed sequence for a one-layer-deep effect only, so it differs from the unchanged logits.
  ids[from + 3] = (ids[from + 3] + 1) % static_cast<int32_t>(vocab);
  const auto changed = model->forward(reuse).value();
  EXPECT_GT(max_abs_diff(changed.data(), part.data(), part.size()), 1e-3f);

  ForwardInput bad = reuse;
  bad.cache_offset = seq - 4;
  auto r = model->forward(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("outside the cached"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace dllm
