// The strategy parts on their own (how many per step), and their combinations through the Denoiser: threshold
// and factor rules, early stop, caches (exact when every step refreshes; measured drift otherwise), the
// steppable interface a scheduler drives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "denoise/batch_forward.h"
#include "denoise/denoiser.h"
#include "denoise/sampler.h"
#include "denoise/schedule.h"
#include "dllm/dllm.h"
#include "scripted_model.h"
#include "test_util.h"

namespace dllm {
namespace {

std::shared_ptr<Model> load(const std::string& name) {
  LoadOptions o;
  o.precision = Precision::kF32;
  o.backend = test::backend();
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

TEST(Schedule, TimestepBernoulliIsOneMinusSOverTAndAllOnTheLastStep) {
  EXPECT_FLOAT_EQ(timestep_bernoulli_probability(1.0f, 0.75f, false), 0.25f);
  EXPECT_EQ(timestep_bernoulli_probability(0.5f, 0.25f, true), 1.0f);
}

// The samplers on their own: their edge cases are exact, and a seed gives the same draw.
TEST(Samplers, BernoulliKeepsEachWithItsProbability) {
  const std::vector<int64_t> pos = {3, 5, 8, 9};
  Rng a(1), b(1);
  EXPECT_EQ(sample_bernoulli(pos, 1.0f, a), pos);
  EXPECT_TRUE(sample_bernoulli(pos, 0.0f, b).empty());
  Rng d(7), e(7);
  EXPECT_EQ(sample_bernoulli(pos, 0.5f, d), sample_bernoulli(pos, 0.5f, e));
}

TEST(Samplers, MultinomialDrawsWithoutReplacement) {
  const std::vector<int64_t> ranked = {4, 2, 7};
  const std::vector<double> scores = {0.9, 0.5, 0.1};
  Rng a(3);
  EXPECT_EQ(sample_multinomial(ranked, scores, 3, 1e-3, a), ranked);  // cold: the score order
  Rng b(3);
  auto all = sample_multinomial(ranked, scores, 3, 100.0, b);  // hot: any order, each once
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<int64_t>{2, 4, 7}));
}

TEST(Samplers, GumbelMaxAndCategoricalNeverPickSuppressedOrRemovedIds) {
  const std::vector<float> logits = {0.0f, 5.0f, 1.0f, 2.0f};
  const std::vector<uint8_t> keep = {1, 0, 1, 1};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Rng a(seed), b(seed);
    EXPECT_NE(sample_gumbel_max(logits, 1, 1.0, a), 1);
    double max = 2.0, sum = 0;
    for (int v : {0, 2, 3}) sum += std::exp(logits[v] - max);
    EXPECT_NE(sample_categorical(logits, keep, max, sum, b), 1);
  }
  Rng c(0);
  EXPECT_EQ(sample_gumbel_max(logits, -1, 1e-3, c), 1);  // cold: the argmax
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

// The first step of each block is a full forward in every mode: a one-step-per-block schedule is exact with
// caches.
TEST(Caches, OneStepPerBlockIsExact) {
  auto p = base(32, 8, 4);
  auto exact = generate(*llada(), {{10, 20, 30}}, p).value();
  p.cache = CacheMode::kDual;
  EXPECT_EQ(generate(*llada(), {{10, 20, 30}}, p).value().outputs, exact.outputs);
}

// Two Denoisers stepped by hand through one batched forward (forward_plans, as the server's scheduler does)
// give what each gives alone; their canvases differ in length, so the shorter one is right-padded.
TEST(Denoiser, TwoRequestsShareOneBatchedForward) {
  auto model = llada();
  auto p = base(16, 8, 16);
  auto alone_a = generate(*model, {{10, 20, 30}}, p).value();
  auto q = base(16, 16, 8);
  auto alone_b = generate(*model, {{40, 50, 60, 70}}, q).value();
  Denoiser a(model->info(), {{10, 20, 30}}, p), b(model->info(), {{40, 50, 60, 70}}, q);
  int64_t shared = 0;
  while (!a.done() || !b.done()) {
    std::vector<Denoiser*> live;
    std::vector<const ForwardPlan*> plans;
    for (Denoiser* d : {&a, &b})
      if (!d->done()) {
        live.push_back(d);
        plans.push_back(&d->plan());
      }
    BatchedLogits out = forward_plans(*model, plans);
    shared += live.size() > 1;
    for (size_t i = 0; i < live.size(); ++i) live[i]->step(out.logits[i]);
  }
  EXPECT_GT(shared, 0);
  EXPECT_EQ(a.result().outputs, alone_a.outputs);
  EXPECT_EQ(b.result().outputs, alone_b.outputs);
}

// plan() is built once per step, however often a driver asks for it before stepping.
TEST(Denoiser, PlanIsBuiltOncePerStep) {
  auto model = llada();
  Denoiser d(model->info(), {{10, 20, 30}}, base(16, 8, 16));
  while (!d.done()) {
    const ForwardPlan& first = d.plan();
    EXPECT_EQ(&d.plan(), &first);
    d.step(model->forward(d.plan().input()).value());
  }
  EXPECT_EQ(d.plans_built(), d.result().forwards);
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
