// The strategy word tables (src/denoise/strategy_names.h): every word parses to its value, aliases point at
// an earlier word, the rules that combine words hold, and docs/denoising.md lists exactly the tables' words.
#include "denoise/strategy_names.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "dllm/error.h"

namespace dllm {
namespace {

template <class V>
void check_axis(const StrategyAxis<V>& axis) {
  std::set<std::string_view> seen;
  for (const auto& w : axis.words) {
    EXPECT_TRUE(seen.insert(w.name).second) << axis.name << ": '" << w.name << "' twice";
    EXPECT_EQ(axis.find(w.name), w.value) << w.name;
    EXPECT_EQ(axis.parse(w.name, "--x"), w.value) << w.name;
    EXPECT_FALSE(w.help.empty()) << w.name;
    const std::string_view canonical = axis.canonical(w.name);
    EXPECT_EQ(axis.find(canonical), w.value);
    EXPECT_NE(axis.accepted().find(std::string(w.name)), std::string::npos) << w.name;
  }
  EXPECT_FALSE(axis.find("magic"));
  try {
    axis.parse("magic", "--flag");
    ADD_FAILURE() << "an unknown word parsed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--flag: 'magic' is not one of " + axis.accepted());
  }
}

TEST(StrategyNames, EveryWordParsesToItsValue) {
  check_axis(unmask_axis());
  check_axis(transfer_axis());
  check_axis(sampler_axis());
  check_axis(cache_axis());
  EXPECT_EQ(sampler_axis().names(), "gumbel | categorical");
  EXPECT_EQ(unmask_axis().names(),
            "confidence | margin | entropy | random | origin | sequential | low_confidence_static | "
            "low_confidence_dynamic");
  EXPECT_EQ(transfer_axis().names(),
            "uniform | timestep | timestep_bernoulli | threshold | factor | llama_cli");
  EXPECT_EQ(cache_axis().names(), "none | prefix | dual | block");
}

// Every word a front end accepted before the tables keeps its meaning.
TEST(StrategyNames, EarlierFrontEndWordsAreAliases) {
  EXPECT_EQ(unmask_axis().canonical("low_confidence"), "confidence");  // LLaDA remasking, serve --alg, HTTP
  EXPECT_EQ(unmask_axis().canonical("maskgit_plus"), "confidence");    // generate --alg, HTTP
  EXPECT_EQ(unmask_axis().canonical("topk_margin"), "margin");         // generate --alg, HTTP
  EXPECT_EQ(unmask_axis().find("origin"), (UnmaskWord{Unmask::kRandom, Transfer::kTimestepBernoulli}));
  EXPECT_EQ(unmask_axis().find("entropy"), (UnmaskWord{Unmask::kEntropy, Transfer::kDefault}));
}

StrategyChoice words(std::map<std::string, std::string> w) {
  StrategyChoice c;
  c.words = std::move(w);
  return c;
}

GenerateParams apply(const StrategyChoice& c, GenerateParams p = {}) {
  apply_strategy(c, p);
  return p;
}

std::string error_key(const StrategyChoice& c) {
  try {
    apply(c);
  } catch (const StrategyError& e) {
    return e.key + ": " + e.what();
  }
  return "";
}

TEST(StrategyNames, ApplyCombinesTheAxesOneWay) {
  // Every key of an axis takes every word of it.
  for (auto key : unmask_axis().keys)
    for (const auto& w : unmask_axis().words) {
      GenerateParams p = apply(words({{std::string(key), std::string(w.name)}}));
      EXPECT_EQ(p.unmask, w.value.unmask) << key << " " << w.name;
      EXPECT_EQ(p.transfer, w.value.transfer) << key << " " << w.name;
    }
  for (const auto& w : transfer_axis().words)
    EXPECT_EQ(apply(words({{"schedule", std::string(w.name)}})).transfer, w.value) << w.name;
  for (const auto& w : sampler_axis().words)
    EXPECT_EQ(apply(words({{"sampler", std::string(w.name)}})).sampler, w.value) << w.name;
  for (const auto& w : cache_axis().words)
    EXPECT_EQ(apply(words({{"cache", std::string(w.name)}})).cache, w.value);

  // Synonyms must agree; an explicit schedule wins over what origin implies.
  EXPECT_EQ(apply(words({{"alg", "maskgit_plus"}, {"unmask", "confidence"}, {"remasking", "low_confidence"}}))
                .unmask,
            Unmask::kConfidence);
  EXPECT_EQ(error_key(words({{"alg", "origin"}, {"unmask", "confidence"}}))
                .rfind("alg: 'origin' contradicts unmask", 0),
            0u);
  GenerateParams p = apply(words({{"alg", "origin"}, {"schedule", "timestep"}}));
  EXPECT_EQ(p.unmask, Unmask::kRandom);
  EXPECT_EQ(p.transfer, Transfer::kTimestep);

  // Numbers select their rule, one of the two, and agree with a schedule word.
  StrategyChoice c;
  c.threshold = 0.5;
  p = apply(c);
  EXPECT_EQ(p.transfer, Transfer::kThreshold);
  EXPECT_EQ(p.threshold, 0.5);
  c.words["schedule"] = "threshold";
  EXPECT_EQ(apply(c).transfer, Transfer::kThreshold);
  c.words["schedule"] = "uniform";
  EXPECT_EQ(error_key(c), "threshold: a threshold is for the threshold rule, but schedule is 'uniform'");
  c.words.clear();
  c.factor = 2;
  EXPECT_EQ(error_key(c).rfind("factor: ", 0), 0u);
  c.threshold.reset();
  EXPECT_EQ(apply(c).transfer, Transfer::kFactor);
  c.factor = -1;
  EXPECT_EQ(error_key(c), "factor: must be > 0, got -1");
  StrategyChoice t;
  t.threshold = 1.5;
  EXPECT_EQ(error_key(t), "threshold: must be in (0, 1], got 1.5");

  // Unknown words name the key and list what it takes; words given are applied over the defaults only.
  EXPECT_EQ(error_key(words({{"cache", "all"}})), "cache: 'all' is not one of none, prefix, dual, block");
  GenerateParams defaults;
  defaults.cache = CacheMode::kDual;
  defaults.transfer = Transfer::kThreshold;
  p = apply(words({{"alg", "margin"}}), defaults);
  EXPECT_EQ(p.cache, CacheMode::kDual);
  EXPECT_EQ(p.transfer, Transfer::kThreshold);
  EXPECT_EQ(p.unmask, Unmask::kMargin);
}

// docs/denoising.md carries the tables' words between two markers: exactly strategy_words_markdown().
TEST(StrategyNames, DocsListExactlyTheTablesWords) {
  std::ifstream in(std::string(DLLM_SOURCE_DIR) + "/docs/denoising.md");
  ASSERT_TRUE(in) << "docs/denoising.md";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- strategy words: begin", end = "<!-- strategy words: end -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << "no '" << begin << "' marker in docs/denoising.md";
  ASSERT_NE(e, std::string::npos) << "no '" << end << "' marker in docs/denoising.md";
  const size_t body = doc.find('\n', b) + 1;
  EXPECT_EQ(doc.substr(body, e - body), strategy_words_markdown())
      << "docs/denoising.md: replace the list between the markers with the text above (the tables in "
         "src/denoise/strategy_names.cpp)";
}

}  // namespace
}  // namespace dllm
