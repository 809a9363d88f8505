// The strategy parts on their own (how many per step), and their combinations through the Denoiser: threshold and
// factor rules, early stop, caches (exact when every step refreshes; measured drift otherwise), the steppable
// interface a scheduler drives.
#include <gtest/gtest.h>

#include "denoise/denoiser.h"
#include "denoise/schedule.h"
#include "dllm/dllm.h"
#include "scripted_model.h"
#include "test_util.h"

namespace dllm {
namespace {

std::shared_ptr<Model> load(const std::string& name) {
  LoadOptions o;
  o.compute = ComputeType::kF32;
  return Model::load(test::data_path("oracle/models/" + name), o).value();
}
std::shared_ptr<Model> llada() {
  static auto m = load("llada_tiny_f32");
  return m;
}
std::shared_ptr<Model> dream() {
  static auto m = load("dream_tiny_gqa_f32");
  return m;
}

TEST(Schedule, UniformCountsPutTheRemainderFirst) {
  EXPECT_EQ(uniform_transfer_counts(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(uniform_transfer_counts(2, 4), (std::vector<int64_t>{1, 1, 0, 0}));
}

TEST(Schedule, ThresholdTakesTheBestAndEveryOneAboveTau) {
  const std::vector<double> c = {0.95, 0.93, 0.91, 0.5, 0.2};
  EXPECT_EQ(threshold_count(c, 0.9), 3);
  EXPECT_EQ(threshold_count(c, 0.99), 1);  // always at least the best one
  EXPECT_EQ(threshold_count(c, 0.1), 5);
  EXPECT_EQ(threshold_count({}, 0.9), 0);
}

TEST(Schedule, FactorRuleIsTheLargestNWithNPlusOneTimesOneMinusCBelowF) {
  // (n+1)(1-c_n): n=1: 2*0.05=0.1; n=2: 3*0.1=0.3; n=3: 4*0.3=1.2; n=4: 5*0.5=2.5
  const std::vector<double> c = {0.95, 0.9, 0.7, 0.5};
  EXPECT_EQ(factor_count(c, 1.0), 2);
  EXPECT_EQ(factor_count(c, 1.3), 3);
  EXPECT_EQ(factor_count(c, 3.0), 4);
  EXPECT_EQ(factor_count(c, 0.01), 1);  // at least one
}

GenerateParams base(int64_t gen, int64_t block, int64_t steps) {
  GenerateParams p;
  p.gen_length = gen;
  p.block_length = block;
  p.steps = steps;
  return p;
}

TEST(Strategies, ThresholdOneIsOnePerStepAndLowThresholdIsFaster) {
  for (auto model : {llada(), dream()}) {
    auto p = base(32, 8, 32);
    p.unmask = Unmask::kConfidence;
    p.transfer = Transfer::kUniform;
    auto exact = generate(*model, {{10, 20, 30}}, p).value();
    p.transfer = Transfer::kThreshold;
    p.threshold = 1.0;  // nothing but the best one reaches 1.0: one token per step, the exact top-1 order
    auto one = generate(*model, {{10, 20, 30}}, p).value();
    EXPECT_EQ(one.outputs, exact.outputs) << model->info().architecture;
    EXPECT_EQ(one.forwards, 32);
    p.threshold = 0.05;
    auto fast = generate(*model, {{10, 20, 30}}, p).value();
    EXPECT_LT(fast.forwards, 32) << model->info().architecture;
    p.transfer = Transfer::kFactor;
    p.factor = 4.0;
    auto factor = generate(*model, {{10, 20, 30}}, p).value();
    EXPECT_LT(factor.forwards, 32);
  }
}

TEST(Strategies, AnyScoreCombinesWithAnySchedule) {
  for (auto model : {llada(), dream()})
    for (Unmask u : {Unmask::kConfidence, Unmask::kMargin, Unmask::kEntropy, Unmask::kRandom})
      for (Transfer t : {Transfer::kUniform, Transfer::kTimestep, Transfer::kThreshold, Transfer::kFactor}) {
        auto p = base(16, 8, 8);
        p.unmask = u;
        p.transfer = t;
        p.seed = 3;
        auto r = generate(*model, {{10, 20, 30}}, p);
        ASSERT_TRUE(r.ok()) << r.error();
        EXPECT_EQ(r->outputs[0].size(), 16u);
        EXPECT_LE(r->forwards, 16);
      }
}

TEST(Strategies, EarlyStopSkipsStepsWithNothingLeftToCommit) {
  // 16 steps per 8-token block: the last 8 steps of each block have nothing to commit; they are skipped.
  auto p = base(16, 8, 32);
  auto r = generate(*llada(), {{10, 20, 30}}, p).value();
  EXPECT_EQ(r.forwards, 16);
  auto q = base(16, 8, 16);
  EXPECT_EQ(generate(*llada(), {{10, 20, 30}}, q).value().outputs, r.outputs);
}

// A scripted model (Dream's ids and logit shift) whose only EOS is at generated position 8: the exact run
// commits it and goes on; with stop_at_eos the row stops once everything before it is committed, EOS fills
// the rest, and the remaining steps are not run.
TEST(Strategies, DreamStopAtEosFillsTheRest) {
  const ModelInfo& info = dream()->info();
  ASSERT_TRUE(info.shift_logits);
  const int32_t eos = info.eos_id, plain = test::ScriptedModel::plain_token(info);
  ASSERT_GE(eos, 0);
  const std::vector<int32_t> prompt = {153, 507, 68};
  test::ScriptedModel model(info, static_cast<int64_t>(prompt.size()),
                            [&](int64_t g) { return g == 8 ? eos : plain; });
  auto p = base(32, 32, 32);
  p.unmask = Unmask::kConfidence;
  auto exact = generate(model, {prompt}, p).value();
  std::vector<int32_t> want(32, plain);
  want[8] = eos;
  ASSERT_EQ(exact.outputs[0], want);  // EOS is committed, and the exact run goes on after it
  EXPECT_EQ(exact.forwards, 32);
  p.stop_at_eos = true;
  auto r = generate(model, {prompt}, p).value();
  std::fill(want.begin() + 8, want.end(), eos);
  EXPECT_EQ(r.outputs[0], want);
  // Dream's timestep schedule commits 0 tokens on the first step and about 1 a step after: EOS (the 9th
  // token) comes around step 10, far before 32.
  EXPECT_LT(r.forwards, 16);
  EXPECT_GE(r.forwards, 9);
}

// Caches: refreshing on every step is a full forward each time, so it must equal the exact run.
TEST(Caches, RefreshEveryStepIsExact) {
  for (auto model : {llada(), dream()})
    for (CacheMode mode : {CacheMode::kPrefix, CacheMode::kDual}) {
      auto p = base(32, 8, 32);
      p.unmask = Unmask::kConfidence;
      auto exact = generate(*model, {{10, 20, 30, 40}}, p).value();
      p.cache = mode;
      p.cache_refresh = 1;
      auto cached = generate(*model, {{10, 20, 30, 40}}, p).value();
      EXPECT_EQ(cached.outputs, exact.outputs) << model->info().architecture;
      EXPECT_EQ(cached.forward_tokens, exact.forward_tokens);
    }
}

TEST(Caches, CachedModesRecomputeLessAndFinish) {
  for (auto model : {llada(), dream()}) {
    auto p = base(32, 8, 32);
    p.unmask = Unmask::kConfidence;
    auto exact = generate(*model, {{10, 20, 30, 40}}, p).value();
    p.cache = CacheMode::kPrefix;
    auto prefix = generate(*model, {{10, 20, 30, 40}}, p).value();
    p.cache = CacheMode::kDual;
    auto dual = generate(*model, {{10, 20, 30, 40}}, p).value();
    EXPECT_EQ(prefix.forwards, exact.forwards);
    EXPECT_LT(prefix.forward_tokens, exact.forward_tokens);
    EXPECT_LT(dual.forward_tokens, prefix.forward_tokens);
    EXPECT_EQ(dual.outputs[0].size(), 32u);
  }
}

// The first step of each block is a full forward in every mode: a one-step-per-block schedule is exact with caches.
TEST(Caches, OneStepPerBlockIsExact) {
  auto p = base(32, 8, 4);
  auto exact = generate(*llada(), {{10, 20, 30}}, p).value();
  p.cache = CacheMode::kDual;
  EXPECT_EQ(generate(*llada(), {{10, 20, 30}}, p).value().outputs, exact.outputs);
}

// Two Denoisers stepped by hand through one batched forward give what each gives alone: the interface a batching
// scheduler uses (rows of equal length here; the server right-pads with validity 0).
TEST(Denoiser, TwoRequestsShareOneBatchedForward) {
  auto model = llada();
  auto p = base(16, 8, 16);
  auto alone_a = generate(*model, {{10, 20, 30}}, p).value();
  auto q = base(16, 16, 8);
  auto alone_b = generate(*model, {{40, 50, 60}}, q).value();
  Denoiser a(model->info(), {{10, 20, 30}}, p), b(model->info(), {{40, 50, 60}}, q);
  while (!a.done() || !b.done()) {
    std::vector<Denoiser*> live;
    for (Denoiser* d : {&a, &b})
      if (!d->done()) live.push_back(d);
    std::vector<int32_t> tokens;
    int64_t logits_from = 1 << 30, len = 0;
    for (Denoiser* d : live) {
      const ForwardPlan& plan = d->plan();
      tokens.insert(tokens.end(), plan.tokens.begin(), plan.tokens.end());
      logits_from = std::min(logits_from, plan.logits_from);
      len = plan.len;
    }
    ForwardInput in;
    in.tokens = tokens;
    in.batch = static_cast<int64_t>(live.size());
    in.logits_from = logits_from;
    auto logits = model->forward(in).value();
    const int64_t vocab = model->info().vocab_size, span = len - logits_from;
    for (size_t i = 0; i < live.size(); ++i) {
      const int64_t skip = live[i]->plan().logits_from - logits_from;
      live[i]->step({logits.data() + (i * span + skip) * vocab, static_cast<size_t>((span - skip) * vocab)});
    }
  }
  EXPECT_EQ(a.result().outputs, alone_a.outputs);
  EXPECT_EQ(b.result().outputs, alone_b.outputs);
}

TEST(Strategies, RejectsBadValuesByName) {
  auto p = base(16, 8, 8);
  p.transfer = Transfer::kThreshold;
  p.threshold = 1.5;
  auto r = generate(*llada(), {{1, 2}}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("threshold must be in (0, 1], got 1.5"), std::string::npos) << r.error();
  p.transfer = Transfer::kFactor;
  p.factor = -1;
  r = generate(*llada(), {{1, 2}}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("factor must be > 0, got -1"), std::string::npos) << r.error();
  p = base(16, 8, 8);
  p.top_k = 5;
  r = generate(*llada(), {{1, 2}}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("top_k"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace dllm
