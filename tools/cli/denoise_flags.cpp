#include "denoise_flags.h"

#include <cctype>
#include <climits>
#include <cstdlib>

#include "core/error.h"
#include "denoise/strategy_names.h"

namespace dllm::cli {

namespace {

template <class V>
void add_axis(CLI::App* cmd, const StrategyAxis<V>& axis, DenoiseFlags& f, const std::string& extra) {
  const std::string first = "--" + std::string(axis.keys[0]);
  for (size_t i = 0; i < axis.keys.size(); ++i) {
    const std::string key(axis.keys[i]);
    const std::string help = i == 0 ? std::string(1, static_cast<char>(std::toupper(axis.what[0]))) +
                                          std::string(axis.what.substr(1)) + ": " + axis.accepted() + extra
                                    : "Same as " + first;
    cmd->add_option("--" + key, f.words[key], help);
  }
}

}  // namespace

void add_denoise_flags(CLI::App* cmd, GenerateParams& p, DenoiseFlags& f) {
  cmd->add_option("--max-new-tokens", p.gen_length, "Alias of --gen-length (Dream's name)");
  add_axis(cmd, unmask_axis(), f,
           "; default: the family's (LLaDA: confidence; Dream: origin, as its generation_config.json)");
  add_axis(cmd, transfer_axis(), f, "; default: the family's (LLaDA: uniform; Dream: timestep)");
  cmd->add_option("--threshold", f.threshold,
                  "Fast-dLLM: commit the best position plus every one with confidence >= this, per step");
  cmd->add_option("--factor", f.factor, "Fast-dLLM: commit the largest n with (n+1)(1-c_n) < this, per step");
  cmd->add_option("--alg-temp", p.alg_temp, "> 0: draw positions by multinomial(softmax(score / alg_temp))")
      ->capture_default_str();
  cmd->add_option("--eps", p.eps, "Dream's last timestep (linspace(1, eps, steps+1))")->capture_default_str();
  cmd->add_option(
         "--top-k", p.top_k,
         "Dream and autoregressive models: keep the top k logits (Dream: -1 = the reference's effective "
         "50; 0 = no filter; autoregressive: <= 0 = no filter)")
      ->capture_default_str();
  cmd->add_option("--top-p", p.top_p, "Dream and autoregressive models: nucleus filter (1 = off)")
      ->capture_default_str();
  add_axis(cmd, sampler_axis(), f, "; default: the family's (LLaDA: gumbel; Dream: categorical)");
  add_axis(cmd, cache_axis(), f, "; default: none (block-diffusion models, LLaDA2 / SDAR: block)");
  // Block-diffusion loops (LLaDA2.x, SDAR; docs/denoising.md "Block diffusion").
  cmd->add_option("--block-loop", f.block_loop,
                  "Block-diffusion models: which official loop runs: " + block_loop_words().accepted() +
                      "; default: the family's (llada2: llada2.1, sdar: sdar)");
  cmd->add_option("--minimal-topk", p.minimal_topk, "LLaDA2: steps per block = min(steps, gen-length / this)")
      ->capture_default_str();
  cmd->add_flag(
      "--eos-early-stop", p.eos_early_stop,
      "LLaDA2: stop once an EOS is committed with nothing masked before it (2.0: within a block; 2.1: "
      "after the block)");
  cmd->add_option("--editing-threshold", p.editing_threshold,
                  "LLaDA2.1: a decoded token of the current block is replaced when the new one's p > this")
      ->capture_default_str();
  cmd->add_option("--max-post-steps", p.max_post_steps,
                  "LLaDA2.1: editing passes over a block once its masks are gone (0 = none)")
      ->capture_default_str();
  cmd->add_option("--num-to-transfer", p.num_to_transfer,
                  "LLaDA2.1: fewest masks committed per step (the top-k fallback below the threshold)")
      ->capture_default_str();
  cmd->add_option("--mask-id", p.mask_id,
                  "The [MASK] id (-1 = the model's; needed when its files name none, as the official LLaDA2 "
                  "generate() takes it)")
      ->capture_default_str();
  cmd->add_option("--eos-id", p.eos_id, "The EOS id (-1 = the model's)")->capture_default_str();
  cmd->add_option("--stop-ids", f.stop_ids,
                  "SDAR: comma-separated ids that end generation after the block holding one; 'none' = never "
                  "(the reference's default); default: the model's EOS and EOT");
  cmd->add_option("--cache-refresh", p.cache_refresh,
                  "With a cache: full recompute every N steps (0 = per block)")
      ->capture_default_str();
}

void apply_denoise_flags(const DenoiseFlags& f, GenerateParams& p) {
  StrategyChoice choice;
  for (const auto& [key, word] : f.words)
    if (word) choice.words[key] = *word;
  choice.threshold = f.threshold;
  choice.factor = f.factor;
  try {
    apply_strategy(choice, p);
  } catch (const StrategyError& e) {
    fail("--", e.key, ": ", e.what());
  }
  if (f.block_loop) p.block_loop = block_loop_words().parse(*f.block_loop, "--block-loop");
  if (f.stop_ids) {
    std::vector<int32_t> ids;
    if (*f.stop_ids != "none") {
      size_t at = 0;
      const std::string& s = *f.stop_ids;
      while (at <= s.size()) {
        const size_t comma = std::min(s.find(',', at), s.size());
        const std::string id = s.substr(at, comma - at);
        char* end = nullptr;
        const long v = std::strtol(id.c_str(), &end, 10);
        if (id.empty() || *end != '\0' || v < 0 || v > INT32_MAX)
          fail("--stop-ids: '", id, "' is not a token id (give ids separated by commas, or 'none')");
        ids.push_back(static_cast<int32_t>(v));
        at = comma + 1;
      }
    }
    p.stop_ids = ids;
  }
}

void add_masked_span_flags(CLI::App* cmd, GenerateParams& params, DenoiseFlags& flags) {
  cmd->add_option("--block-length", params.block_length,
                  "Masked positions per block, left to right (0 = all: one block); must divide their number")
      ->capture_default_str();
  cmd->add_option("--steps", params.steps,
                  "Denoising steps in total, split evenly over blocks (0 = one token per step)")
      ->capture_default_str();
  cmd->add_option("--temperature", params.temperature, "Gumbel-max sampling temperature (0 = argmax)")
      ->capture_default_str();
  cmd->add_option("--seed", params.seed, "Random seed for sampling and random unmasking")
      ->capture_default_str();
  add_denoise_flags(cmd, params, flags);
}

}  // namespace dllm::cli
