// The denoising loops fed LogitStats instead of logits (what they take on a device backend, where the logits
// never leave the device): the same tokens as from the logits, for every rule that takes them, and the logits
// still where a rule reads more of them. The models here reduce on the host (Model::forward_stats' default)
// behind a wrapper that says it reduces on a device, so the stats path runs on any machine; the Vulkan golden
// tests (tests/CMakeLists.txt) run the real device reduction.
#include <gtest/gtest.h>

#include <atomic>

#include "denoise/denoise_loop.h"
#include "dllm/dllm.h"
#include "test_util.h"

namespace dllm {
namespace {

// A model that answers forward_stats from the wrapped model's host reduction and claims to reduce on a
// device, counting which of the two a loop asked for.
class StatsModel final : public Model {
 public:
  explicit StatsModel(std::shared_ptr<Model> m) : m_(std::move(m)) {}
  const ModelInfo& info() const override { return m_->info(); }
  Expected<std::vector<float>> forward(const ForwardInput& in) override {
    ++logits_calls;
    return m_->forward(in);
  }
  Expected<std::vector<LogitStats>> forward_stats(const ForwardInput& in) override {
    ++stats_calls;
    return m_->Model::forward_stats(in);  // the host reduction of the wrapped model's logits
  }
  bool reduces_on_device() const override { return true; }
  std::atomic<int64_t> logits_calls{0}, stats_calls{0};

 private:
  std::shared_ptr<Model> m_;
};

std::shared_ptr<Model> load(const std::string& name) {
  LoadOptions o;
  o.precision = Precision::kF32;
  return Model::load(test::data_path("oracle/models/" + name), o).value();
}

struct Case {
  std::string name, model;
  GenerateParams params;
  bool takes_stats = true;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  auto add = [&](std::string name, std::string model, auto set, bool stats = true) {
    GenerateParams p;
    p.gen_length = 32;
    p.block_length = 8;
    p.steps = 16;
    set(p);
    c.push_back({std::move(name), std::move(model), p, stats});
  };
  add("llada_confidence", "llada_tiny_f32", [](GenerateParams&) {});
  add("llada_margin", "llada_tiny_f32", [](GenerateParams& p) { p.unmask = Unmask::kMargin; });
  add("llada_entropy", "llada_tiny_f32", [](GenerateParams& p) { p.unmask = Unmask::kEntropy; });
  add("llada_random", "llada_tiny_f32", [](GenerateParams& p) { p.remasking = Remasking::kRandom; });
  add("llada_threshold_dual_cache", "llada_tiny_f32", [](GenerateParams& p) {
    p.transfer = Transfer::kThreshold;
    p.threshold = 0.5;
    p.cache = CacheMode::kDual;
  });
  add("dream_entropy", "dream_tiny_gqa_f32", [](GenerateParams& p) {
    p.unmask = Unmask::kEntropy;
    p.top_k = 0;
  });
  add("sdar_dynamic", "sdar_tiny_f32", [](GenerateParams& p) {
    p.block_loop = BlockLoop::kSdar;
    p.block_length = 0;
    p.steps = 4;
    p.unmask = Unmask::kLowConfidenceDynamic;
  });
  add("llada2.1", "llada2_tiny_f32", [](GenerateParams& p) {
    p.block_loop = BlockLoop::kLlada21;
    p.block_length = 0;
    p.steps = 0;
    p.block_threshold = 0.7;
    p.editing_threshold = 0.5;
    p.mask_id = 503;  // the golden's (tests/data/oracle/golden/llada2_tiny_f32/generate_llada2_1.json)
    p.eos_id = 500;
  });
  // Rules that read more of the logits than their stats: the loop asks for the logits.
  add(
      "llada_gumbel_temperature", "llada_tiny_f32", [](GenerateParams& p) { p.temperature = 0.7; }, false);
  add(
      "llada_cfg", "llada_tiny_f32", [](GenerateParams& p) { p.cfg_scale = 1.0; }, false);
  add(
      "llada_logits_eos_inf", "llada_tiny_f32", [](GenerateParams& p) { p.logits_eos_inf = true; }, false);
  add(
      "dream_top_k", "dream_tiny_gqa_f32", [](GenerateParams& p) { p.top_k = 5; }, false);
  add(
      "sdar_sampled", "sdar_tiny_f32",
      [](GenerateParams& p) {
        p.block_loop = BlockLoop::kSdar;
        p.block_length = 0;
        p.steps = 4;
        p.temperature = 1.0;
      },
      false);
  return c;
}

TEST(StatsLoop, SameTokensAsFromTheLogitsAndTheLogitsWhereARuleNeedsThem) {
  int ran = 0;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    auto model = load(c.model);
    StatsModel stats(model);
    const std::vector<std::vector<int32_t>> prompts = {{10, 20, 30}, {40, 50, 60}};
    const auto from_logits = generate(*model, prompts, c.params).value();
    const auto from_stats = generate(stats, prompts, c.params).value();
    EXPECT_EQ(from_stats.outputs, from_logits.outputs);
    EXPECT_EQ(from_stats.forwards, from_logits.forwards);
    ASSERT_FALSE(from_stats.outputs.empty());
    EXPECT_GT(from_stats.outputs[0].size(), 0u);
    if (c.takes_stats) {
      EXPECT_EQ(stats.logits_calls, 0);
      EXPECT_EQ(stats.stats_calls, from_stats.forwards);
    } else {
      EXPECT_EQ(stats.stats_calls, 0);
      EXPECT_EQ(stats.logits_calls, from_stats.forwards);
    }
    ++ran;
  }
  EXPECT_EQ(ran, 13);
}

// A loop refuses stats where its rule reads the logits, rather than ranking on the wrong numbers.
TEST(StatsLoop, AStepFromStatsIsRefusedWhereTheRuleReadsTheLogits) {
  auto model = load("llada_tiny_f32");
  GenerateParams p;
  p.gen_length = 8;
  p.steps = 8;
  p.temperature = 0.5;
  auto loop = make_denoise_loop(model->info(), {{10, 20}}, p);
  EXPECT_FALSE(loop->takes_stats());
  const auto stats = model->forward_stats(loop->plan().input()).value();
  EXPECT_THROW(loop->step(std::span<const LogitStats>(stats)), Error);
}

}  // namespace
}  // namespace dllm
