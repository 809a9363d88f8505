#include "denoise_flags.h"

#include <cctype>

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
  cmd->add_option("--top-k", p.top_k,
                  "Dream: keep the top k logits (-1 = the reference's effective 50; 0 = no filter)")
      ->capture_default_str();
  cmd->add_option("--top-p", p.top_p, "Dream: nucleus filter (1 = off)")->capture_default_str();
  add_axis(cmd, sampler_axis(), f, "; default: the family's (LLaDA: gumbel; Dream: categorical)");
  add_axis(cmd, cache_axis(), f, "; default: none");
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
}

}  // namespace dllm::cli
