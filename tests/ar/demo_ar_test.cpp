// models/demo-ar, the demo dLLM's autoregressive twin (tools/train/export_ar.py): the engine's greedy tokens
// equal the training code's own greedy continuations (reference_generation.json: torch, full recompute per
// token), and the trained demo dLLM drafting for it changes nothing but the speed, with or without the
// drafter's prefix cache.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "dllm/dllm.h"

namespace dllm {
namespace {

const std::string kDemoAr = std::string(DLLM_SOURCE_DIR) + "/models/demo-ar";
const std::string kDemo = std::string(DLLM_SOURCE_DIR) + "/models/demo";

struct Case {
  std::vector<int32_t> prompt, expected;
};

std::vector<Case> reference_cases() {
  std::ifstream in(kDemoAr + "/reference_generation.json");
  EXPECT_TRUE(in) << kDemoAr << "/reference_generation.json";
  std::vector<Case> cases;
  if (!in) return cases;
  const auto j = nlohmann::json::parse(in);
  for (const auto& c : j.at("cases"))
    cases.push_back(
        {c.at("prompt_ids").get<std::vector<int32_t>>(), c.at("generated_ids").get<std::vector<int32_t>>()});
  return cases;
}

GenerateParams greedy(int64_t n) {
  GenerateParams p;
  p.gen_length = n;
  p.stop_ids = std::vector<int32_t>{};  // the reference does not stop at <|endoftext|>
  return p;
}

TEST(DemoAr, GreedyEqualsTheTrainingCode) {
  auto model = Model::load(kDemoAr);
  ASSERT_TRUE(model.ok()) << model.error();
  EXPECT_TRUE(model.value()->info().autoregressive);
  const auto cases = reference_cases();
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& c : cases) {
    auto out = generate(*model.value(), {c.prompt}, greedy(static_cast<int64_t>(c.expected.size())));
    ASSERT_TRUE(out.ok()) << out.error();
    EXPECT_EQ(out.value().outputs[0], c.expected);
  }
}

TEST(DemoAr, TheDemoDllmDraftsWithoutChangingTheOutput) {
  auto ar = Model::load(kDemoAr);
  auto dllm = Model::load(kDemo);
  ASSERT_TRUE(ar.ok() && dllm.ok());
  const auto cases = reference_cases();
  ASSERT_EQ(cases.size(), 3u);
  int64_t accepted[2] = {0, 0}, rounds[2] = {0, 0};
  for (const auto& c : cases)
    for (bool cache : {false, true}) {
      SpeculativeStats stats;
      auto out =
          generate_speculative(*ar.value(), *dllm.value(), {c.prompt},
                               greedy(static_cast<int64_t>(c.expected.size())), {8, 1, cache}, {}, &stats);
      ASSERT_TRUE(out.ok()) << out.error();
      EXPECT_EQ(out.value().outputs[0], c.expected) << "cache " << cache;
      accepted[cache] += stats.accepted;
      rounds[cache] += stats.rounds;
    }
  // The trained pair agrees on a fair share of first drafts (~0.4 accepted a round at k = 8 when this was
  // written; the demo dLLM is weak, issue 16; a random drafter over 4096 ids gets ~0), and the prefix cache
  // keeps that agreement: a cache that broke the drafter (wrong positions, stale text) would drop it to ~0.
  const double full = static_cast<double>(accepted[0]) / static_cast<double>(rounds[0]);
  const double cached = static_cast<double>(accepted[1]) / static_cast<double>(rounds[1]);
  EXPECT_GT(full, 0.2);
  EXPECT_GT(cached, 0.75 * full) << "uncached " << full << " accepted per round, cached " << cached;
}

}  // namespace
}  // namespace dllm
