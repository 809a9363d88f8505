#include "denoise_flags.h"

#include "core/error.h"

namespace dllm::cli {

void add_denoise_flags(CLI::App* cmd, GenerateParams& p, DenoiseFlags& f) {
  cmd->add_option("--max-new-tokens", p.gen_length, "Alias of --gen-length (Dream's name)");
  cmd->add_option("--alg", f.alg,
                  "Dream's unmasking algorithm: origin (random positions, 1-s/t each) | maskgit_plus (confidence) | "
                  "topk_margin | entropy; default for Dream models: origin, as its generation_config.json");
  cmd->add_option("--unmask", f.unmask, "Which positions first: confidence | margin | entropy | random "
                                        "(default: the family's; overrides --remasking / --alg)");
  cmd->add_option("--schedule", f.schedule, "How many per step: uniform (LLaDA) | timestep (Dream 1-s/t)");
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
  cmd->add_option("--cache", f.cache, "What a step recomputes: none (exact) | prefix | dual (Fast-dLLM)")
      ->capture_default_str();
  cmd->add_option("--cache-refresh", p.cache_refresh, "With a cache: full recompute every N steps (0 = per block)")
      ->capture_default_str();
}

void apply_denoise_flags(const DenoiseFlags& f, GenerateParams& p) {
  if (!f.alg.empty()) {
    if (f.alg == "origin") {
      p.unmask = Unmask::kRandom;
      p.transfer = Transfer::kTimestepBernoulli;
    } else {
      if (f.alg == "maskgit_plus") p.unmask = Unmask::kConfidence;
      else if (f.alg == "topk_margin") p.unmask = Unmask::kMargin;
      else if (f.alg == "entropy") p.unmask = Unmask::kEntropy;
      else fail("--alg: '", f.alg, "' is not one of origin, maskgit_plus, topk_margin, entropy");
      p.transfer = Transfer::kTimestep;
    }
  }
  if (!f.unmask.empty()) {
    if (f.unmask == "confidence") p.unmask = Unmask::kConfidence;
    else if (f.unmask == "margin") p.unmask = Unmask::kMargin;
    else if (f.unmask == "entropy") p.unmask = Unmask::kEntropy;
    else if (f.unmask == "random") p.unmask = Unmask::kRandom;
    else fail("--unmask: '", f.unmask, "' is not one of confidence, margin, entropy, random");
  }
  if (!f.schedule.empty()) {
    if (f.schedule == "uniform") p.transfer = Transfer::kUniform;
    else if (f.schedule == "timestep") p.transfer = Transfer::kTimestep;
    else fail("--schedule: '", f.schedule, "' is not one of uniform, timestep");
  }
  if (f.threshold && f.factor) fail("--threshold and --factor are two different rules; give one");
  if (f.threshold) {
    p.transfer = Transfer::kThreshold;
    p.threshold = *f.threshold;
  }
  if (f.factor) {
    p.transfer = Transfer::kFactor;
    p.factor = *f.factor;
  }
  if (f.cache == "none") p.cache = CacheMode::kNone;
  else if (f.cache == "prefix") p.cache = CacheMode::kPrefix;
  else if (f.cache == "dual") p.cache = CacheMode::kDual;
  else fail("--cache: '", f.cache, "' is not one of none, prefix, dual");
}

}  // namespace dllm::cli
