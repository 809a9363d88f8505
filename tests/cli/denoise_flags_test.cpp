// The strategy flags of `dllm generate` / `infill` / `serve` (tools/cli/denoise_flags.cpp): every word of
// every axis through every flag that takes it, parsed by CLI11 as the command line is; unknown words fail
// naming the flag and listing the words. tests/cli/strategy_words.sh runs the real command.
#include "denoise_flags.h"

#include <gtest/gtest.h>

#include "denoise/strategy_names.h"
#include "dllm/error.h"

namespace dllm::cli {
namespace {

GenerateParams parse(std::vector<std::string> args) {
  CLI::App app;
  GenerateParams params;
  DenoiseFlags flags;
  add_denoise_flags(&app, params, flags);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
  apply_denoise_flags(flags, params);
  return params;
}

std::string error_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DenoiseFlags, EveryWordThroughEveryFlag) {
  for (auto key : unmask_axis().keys)
    for (const auto& w : unmask_axis().words) {
      const GenerateParams p = parse({"--" + std::string(key), std::string(w.name)});
      EXPECT_EQ(p.unmask, w.value.unmask) << key << " " << w.name;
      EXPECT_EQ(p.transfer, w.value.transfer) << key << " " << w.name;
    }
  for (const auto& w : transfer_axis().words)
    EXPECT_EQ(parse({"--schedule", std::string(w.name)}).transfer, w.value) << w.name;
  for (const auto& w : sampler_axis().words)
    EXPECT_EQ(parse({"--sampler", std::string(w.name)}).sampler, w.value) << w.name;
  for (const auto& w : cache_axis().words) EXPECT_EQ(parse({"--cache", std::string(w.name)}).cache, w.value);
  EXPECT_EQ(parse({}).unmask, Unmask::kDefault);  // nothing given: the family's
  EXPECT_EQ(parse({}).transfer, Transfer::kDefault);
}

TEST(DenoiseFlags, UnknownWordsNameTheFlagAndListTheWords) {
  for (auto key : unmask_axis().keys)
    EXPECT_EQ(error_of({"--" + std::string(key), "magic"}),
              "--" + std::string(key) + ": 'magic' is not one of " + unmask_axis().accepted());
  EXPECT_EQ(error_of({"--schedule", "fast"}),
            "--schedule: 'fast' is not one of " + transfer_axis().accepted());
  EXPECT_EQ(error_of({"--cache", "all"}), "--cache: 'all' is not one of none, prefix, dual, block");
  EXPECT_EQ(error_of({"--threshold", "0.5", "--factor", "1"}).rfind("--factor: ", 0), 0u);
  EXPECT_EQ(error_of({"--alg", "origin", "--unmask", "margin"})
                .rfind("--alg: 'origin' contradicts unmask 'margin'", 0),
            0u);
}

TEST(DenoiseFlags, RulesTakeTheirNumbers) {
  GenerateParams p = parse({"--threshold", "0.7"});
  EXPECT_EQ(p.transfer, Transfer::kThreshold);
  EXPECT_EQ(p.threshold, 0.7);
  p = parse({"--factor", "2", "--schedule", "factor"});
  EXPECT_EQ(p.transfer, Transfer::kFactor);
  EXPECT_EQ(p.factor, 2.0);
  EXPECT_EQ(error_of({"--threshold", "1.5"}), "--threshold: must be in (0, 1], got 1.5");
}

// --help lists every canonical word of every axis, from the tables.
TEST(DenoiseFlags, HelpListsTheTables) {
  CLI::App app;
  GenerateParams params;
  DenoiseFlags flags;
  add_denoise_flags(&app, params, flags);
  const std::string help = app.help();
  for (const auto& w : unmask_axis().words)
    EXPECT_NE(help.find(std::string(w.name)), std::string::npos) << w.name;
  for (const auto& w : transfer_axis().words)
    EXPECT_NE(help.find(std::string(w.name)), std::string::npos) << w.name;
  for (const auto& w : sampler_axis().words)
    EXPECT_NE(help.find(std::string(w.name)), std::string::npos) << w.name;
  for (const auto& w : cache_axis().words)
    EXPECT_NE(help.find(std::string(w.name)), std::string::npos) << w.name;
}

// The block-diffusion flags (LLaDA2.x, SDAR).
TEST(DenoiseFlags, BlockLoopFlags) {
  GenerateParams p = parse({"--block-loop", "llada2.0", "--minimal-topk", "2", "--eos-early-stop",
                            "--editing-threshold", "0.5", "--max-post-steps", "3", "--num-to-transfer", "2",
                            "--stop-ids", "451,450", "--threshold", "0.7"});
  EXPECT_EQ(p.block_loop, BlockLoop::kLlada20);
  EXPECT_EQ(p.minimal_topk, 2);
  EXPECT_TRUE(p.eos_early_stop);
  EXPECT_EQ(p.editing_threshold, 0.5);
  EXPECT_EQ(p.max_post_steps, 3);
  EXPECT_EQ(p.num_to_transfer, 2);
  EXPECT_EQ(p.stop_ids, (std::vector<int32_t>{451, 450}));
  EXPECT_EQ(p.block_threshold, 0.7);
  EXPECT_EQ(parse({"--block-loop", "sdar"}).block_loop, BlockLoop::kSdar);
  EXPECT_EQ(parse({"--mask-id", "503", "--eos-id", "500"}).mask_id, 503);
  EXPECT_EQ(parse({"--eos-id", "500"}).eos_id, 500);
  EXPECT_EQ(parse({}).mask_id, -1);
  EXPECT_EQ(parse({"--block-loop", "llada2.1"}).block_loop, BlockLoop::kLlada21);
  EXPECT_EQ(parse({"--stop-ids", "none"}).stop_ids, std::vector<int32_t>{});
  EXPECT_FALSE(parse({}).stop_ids.has_value());  // the model's EOS / EOT
  EXPECT_EQ(parse({}).block_loop, BlockLoop::kDefault);
  EXPECT_EQ(parse({}).cache, CacheMode::kDefault);
  EXPECT_EQ(error_of({"--block-loop", "llada3"}),
            "--block-loop: 'llada3' is not one of " + block_loop_words().accepted());
  EXPECT_NE(error_of({"--stop-ids", "1,x"}).find("--stop-ids: 'x' is not a token id"), std::string::npos);
  EXPECT_EQ(parse({"--remasking", "low_confidence_static"}).unmask, Unmask::kLowConfidenceStatic);
  EXPECT_EQ(parse({"--remasking", "low_confidence_dynamic"}).unmask, Unmask::kLowConfidenceDynamic);
  EXPECT_EQ(parse({"--remasking", "sequential"}).unmask, Unmask::kSequential);
}

}  // namespace
}  // namespace dllm::cli
