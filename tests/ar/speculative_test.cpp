// Speculative decoding with a diffusion drafter: greedy output equals the verifier's own greedy output
// whatever the drafter (random tiny LLaDA / Dream models, an oracle drafter that always agrees, one that
// agrees for the first tokens of each round); sampling follows the verifier's distribution (empirical
// frequencies of the first tokens against the probabilities); mismatched pairs are refused with a clear
// error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "ar/token_sampler.h"
#include "cache/kv_cache.h"
#include "dllm/dllm.h"
#include "test_util.h"

namespace dllm {
namespace {

std::shared_ptr<Model> load(const std::string& rel) {
  auto m = Model::load(test::data_path(rel));
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error());
  return m.ok() ? m.value() : nullptr;
}

// A diffusion model whose drafts come from the verifier's own greedy continuation: masked position j after a
// context predicts what the verifier would say there, except every `wrong_every`-th masked position (counted
// in the block), which predicts another id. mask 0 is a spare id of the vocabulary.
class OracleDrafter : public Model {
 public:
  OracleDrafter(Model& verifier, int64_t wrong_every) : verifier_(verifier), wrong_every_(wrong_every) {
    info_ = verifier.info();
    info_.autoregressive = false;
    info_.mask_id = 0;
    info_.shift_logits = false;
    info_.path = "oracle-drafter";
  }
  const ModelInfo& info() const override { return info_; }
  Expected<std::vector<float>> forward(const ForwardInput& in) override {
    const auto n = static_cast<int64_t>(in.tokens.size());
    int64_t first_mask = n;
    while (first_mask > 0 && in.tokens[first_mask - 1] == info_.mask_id) --first_mask;
    std::vector<int32_t> context(in.tokens.begin(), in.tokens.begin() + first_mask);
    GenerateParams p;
    p.gen_length = n - first_mask;
    p.stop_ids = std::vector<int32_t>{};
    const auto want = generate(verifier_, {context}, p).value().outputs[0];
    const int64_t V = info_.vocab_size, rows = logits_end(in) - in.logits_from;
    std::vector<float> logits(static_cast<size_t>(rows * V), 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t pos = in.logits_from + r;
      if (pos < first_mask) continue;
      const int64_t j = pos - first_mask;
      int32_t t = want[j];
      if (wrong_every_ > 0 && (j + 1) % wrong_every_ == 0) t = (t + 1) % static_cast<int32_t>(V);
      logits[r * V + t] = 10.0f;
    }
    return logits;
  }

 private:
  Model& verifier_;
  int64_t wrong_every_;
  ModelInfo info_;
};

// Delegates to a real drafter and keeps the logits of every forward.
class RecordingDrafter : public Model {
 public:
  explicit RecordingDrafter(Model& inner) : inner_(inner) {}
  const ModelInfo& info() const override { return inner_.info(); }
  Expected<std::vector<float>> forward(const ForwardInput& in) override {
    cached_before.push_back(in.cache ? in.cache->seq_len : 0);
    fed.emplace_back(in.tokens.begin(), in.tokens.end());
    auto r = inner_.forward(in);
    if (r.ok()) logits.push_back(r.value());
    return r;
  }
  std::vector<std::vector<float>> logits;
  std::vector<int64_t> cached_before;     // the drafter cache's length when each forward started
  std::vector<std::vector<int32_t>> fed;  // the tokens each forward ran

 private:
  Model& inner_;
};

GenerateParams greedy(int64_t n) {
  GenerateParams p;
  p.gen_length = n;
  p.stop_ids = std::vector<int32_t>{};
  return p;
}

TEST(Speculative, GreedyEqualsTheVerifierAloneWithRandomDrafters) {
  auto ar = load("oracle/ar/models/llama3_tiny");
  ASSERT_TRUE(ar);
  const std::vector<int32_t> prompt = {507, 178, 17, 425, 303, 31, 172, 350, 457, 164};
  const auto alone = generate(*ar, {prompt}, greedy(32)).value().outputs[0];
  int checked = 0;
  for (const char* drafter_path : {"oracle/models/llada_tiny_f32", "oracle/models/dream_tiny_gqa_f32"}) {
    auto drafter = load(drafter_path);
    ASSERT_TRUE(drafter);
    for (int64_t k : {1, 4, 8})
      for (int64_t steps : {int64_t{1}, k}) {
        int64_t uncached_positions = 0;
        for (bool cache : {false, true}) {
          SpeculativeStats stats;
          const auto r =
              generate_speculative(*ar, *drafter, {prompt}, greedy(32), {k, steps, cache}, {}, &stats)
                  .value();
          EXPECT_EQ(r.outputs[0], alone)
              << drafter_path << " k=" << k << " steps=" << steps << " cache=" << cache;
          // `steps` forwards a round (fewer in a last round with fewer than `steps` tokens left to draft).
          EXPECT_LE(stats.draft_forwards, stats.rounds * steps);
          EXPECT_GE(stats.draft_forwards, stats.rounds);
          if (!cache) uncached_positions = stats.draft_positions;
          // The cache runs only the new text and the masks after the first round.
          if (cache && stats.rounds > 1) {
            EXPECT_LT(stats.draft_positions, uncached_positions);
          }
          ++checked;
        }
      }
  }
  EXPECT_EQ(checked, 24);
}

TEST(Speculative, PerfectDraftsAreAllAcceptedAndSaveVerifierForwards) {
  auto ar = load("oracle/ar/models/qwen2_tiny");
  ASSERT_TRUE(ar);
  const std::vector<int32_t> prompt = {314, 178, 17, 425};
  const auto alone = generate(*ar, {prompt}, greedy(30)).value();
  OracleDrafter drafter(*ar, 0);
  SpeculativeStats stats;
  const auto r = generate_speculative(*ar, drafter, {prompt}, greedy(30), {4, 1, false}, {}, &stats).value();
  EXPECT_EQ(r.outputs[0], alone.outputs[0]);
  EXPECT_EQ(stats.accepted, stats.drafted);  // every draft kept
  EXPECT_EQ(stats.rounds, 6);                // 5 tokens a round (4 drafts + the verifier's own), 30 tokens
  EXPECT_EQ(stats.verify_forwards, 7);       // the prefill and one forward a round
  EXPECT_LT(stats.verify_forwards, alone.forwards);
}

TEST(Speculative, PartlyWrongDraftsKeepTheAgreeingPrefix) {
  auto ar = load("oracle/ar/models/qwen3_tiny");
  ASSERT_TRUE(ar);
  const std::vector<int32_t> prompt = {314, 178, 17, 425, 303};
  const auto alone = generate(*ar, {prompt}, greedy(24)).value().outputs[0];
  OracleDrafter drafter(*ar, 3);  // the third draft of each round is wrong
  SpeculativeStats stats;
  const auto r = generate_speculative(*ar, drafter, {prompt}, greedy(24), {6, 2, false}, {}, &stats).value();
  EXPECT_EQ(r.outputs[0], alone);
  EXPECT_EQ(stats.accepted, 2 * stats.rounds);  // two drafts kept, then the correction
}

// The first two sampled tokens follow the verifier's distribution: frequencies of token 1, and of token 2
// after the most frequent token 1, within 4 standard errors of the probabilities.
TEST(Speculative, SamplingFollowsTheVerifierDistribution) {
  auto ar = load("oracle/ar/models/qwen2_tiny");
  auto drafter = load("oracle/models/llada_tiny_f32");
  ASSERT_TRUE(ar && drafter);
  const std::vector<int32_t> prompt = {314, 178};
  GenerateParams p = greedy(2);
  p.temperature = 1.0;
  p.top_k = 4;  // few outcomes, so that frequencies converge in a few thousand draws
  const int n = 3000;
  std::map<int32_t, int> first;
  std::map<int32_t, std::map<int32_t, int>> second;
  for (int i = 0; i < n; ++i) {
    p.seed = static_cast<uint64_t>(i);
    const auto out = generate_speculative(*ar, *drafter, {prompt}, p, {1, 1}).value().outputs[0];
    ASSERT_EQ(out.size(), 2u);
    ++first[out[0]];
    ++second[out[0]][out[1]];
  }
  auto probabilities = [&](const std::vector<int32_t>& context) {
    ForwardInput in;
    in.tokens = context;
    in.attention_block = 1;
    in.logits_from = static_cast<int64_t>(context.size()) - 1;
    const auto logits = ar->forward(in).value();
    std::vector<float> probs(logits.size());
    token_probabilities(logits, {1.0, 4, 1.0}, probs);
    return probs;
  };
  const auto p1 = probabilities(prompt);
  int32_t top = 0;
  for (int32_t v = 0; v < static_cast<int32_t>(p1.size()); ++v) {
    const double f = first[v] / static_cast<double>(n), se = std::sqrt(p1[v] * (1 - p1[v]) / n) + 1e-9;
    EXPECT_LE(std::abs(f - p1[v]), 4 * se + 1e-3) << "token " << v;
    if (first[v] > first[top]) top = v;
  }
  auto context = prompt;
  context.push_back(top);
  const auto p2 = probabilities(context);
  const int m = first[top];
  for (int32_t v = 0; v < static_cast<int32_t>(p2.size()); ++v) {
    const double f = second[top][v] / static_cast<double>(m), se = std::sqrt(p2[v] * (1 - p2[v]) / m) + 1e-9;
    EXPECT_LE(std::abs(f - p2[v]), 4 * se + 1e-3) << "second token " << v;
  }
}

TEST(Speculative, MismatchedPairsAreRefused) {
  auto ar = load("oracle/ar/models/qwen2_tiny");
  auto dllm = load("oracle/models/llada_tiny_f32");
  auto block = load("oracle/models/sdar_tiny_f32");
  ASSERT_TRUE(ar && dllm && block);
  auto err = [&](Model& v, Model& d, DraftParams dp, GenerateParams p) {
    auto r = generate_speculative(v, d, {{1, 2}}, p, dp);
    return r.ok() ? std::string() : r.error();
  };
  EXPECT_NE(err(*dllm, *dllm, {}, greedy(4)).find("verifies with an autoregressive model"),
            std::string::npos);
  EXPECT_NE(err(*ar, *ar, {}, greedy(4)).find("must be a diffusion model"), std::string::npos);
  EXPECT_NE(err(*ar, *block, {}, greedy(4)).find("block-diffusion"), std::string::npos);
  EXPECT_NE(err(*ar, *dllm, {0, 1}, greedy(4)).find("--draft-tokens"), std::string::npos);
  GenerateParams sampled = greedy(4);
  sampled.temperature = 1;
  EXPECT_NE(err(*ar, *dllm, {4, 2}, sampled).find("--draft-steps 1"), std::string::npos);
}

}  // namespace
// The first round of a cached drafter runs the whole text like the uncached one: the same logits, and later
// rounds (text + masks against the cache) stay close to a full recompute.
TEST(Speculative, CachedDrafterFirstRoundIsTheFullForward) {
  auto ar = load("oracle/ar/models/llama3_tiny");
  ASSERT_TRUE(ar);
  const std::vector<int32_t> prompt = {507, 178, 17, 425, 303, 31, 172, 350, 457, 164};
  int checked = 0;
  for (const char* drafter_path : {"oracle/models/llada_tiny_f32", "oracle/models/dream_tiny_gqa_f32"}) {
    auto inner = load(drafter_path);
    ASSERT_TRUE(inner);
    RecordingDrafter full(*inner), cached(*inner);
    generate_speculative(*ar, full, {prompt}, greedy(24), {4, 2, false}).value();
    generate_speculative(*ar, cached, {prompt}, greedy(24), {4, 2, true}).value();
    ASSERT_GE(full.logits.size(), 2u);
    ASSERT_EQ(full.logits[0].size(), cached.logits[0].size());
    float worst = 0;
    for (size_t i = 0; i < full.logits[0].size(); ++i)
      worst = std::max(worst, std::abs(full.logits[0][i] - cached.logits[0][i]));
    EXPECT_LT(worst, 1e-4f) << drafter_path;
    // Step 2 of round 1 runs [last text token, 4 drafts] against the cache: its rows cover the same
    // positions as the full forward's.
    ASSERT_EQ(full.logits[1].size(), cached.logits[1].size()) << drafter_path;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// The cache holds exactly the text minus its last token: every round runs what was emitted since the last
// round (after the previous last token) plus the masks, and everything but the new last token and the masks
// joins the cache.
TEST(Speculative, DrafterCacheHoldsTheTextButItsLastToken) {
  auto ar = load("oracle/ar/models/llama3_tiny");
  auto inner = load("oracle/models/llada_tiny_f32");
  ASSERT_TRUE(ar && inner);
  const std::vector<int32_t> prompt = {507, 178, 17, 425, 303, 31, 172, 350, 457, 164};
  RecordingDrafter cached(*inner);
  const int64_t k = 4;
  const auto out = generate_speculative(*ar, cached, {prompt}, greedy(40), {k, 1, true}).value().outputs[0];
  std::vector<int32_t> text = prompt;
  text.insert(text.end(), out.begin(), out.end());
  ASSERT_GE(cached.fed.size(), 3u);
  EXPECT_EQ(cached.cached_before[0], 0);
  for (size_t r = 0; r < cached.fed.size(); ++r) {
    const auto& f = cached.fed[r];
    // One logits row per draft (LLaDA: no shift); the text may itself hold the mask id.
    const auto drafts = static_cast<int64_t>(cached.logits[r].size()) / inner->info().vocab_size;
    ASSERT_GE(drafts, 1);
    const int64_t text_run = static_cast<int64_t>(f.size()) - drafts;
    ASSERT_GE(text_run, 1) << "round " << r;
    // The text run is the true text from the cached length on.
    const int64_t from = cached.cached_before[r];
    ASSERT_LE(from + text_run, static_cast<int64_t>(text.size()));
    EXPECT_TRUE(std::equal(f.begin(), f.begin() + text_run, text.begin() + from)) << "round " << r;
    if (r + 1 < cached.fed.size()) {
      EXPECT_EQ(cached.cached_before[r + 1], from + text_run - 1) << "round " << r;
    }
  }
}

}  // namespace dllm
