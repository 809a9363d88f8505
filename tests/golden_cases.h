// The oracle's golden generation cases as engine parameters: LLaDA generate() and Dream diffusion_generate()
// keyword arguments -> GenerateParams, and a case's prompt rows. Shared by the denoise and GGUF tests.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dllm/dllm.h"

namespace dllm::test {

// LLaDA generate(): every keyword is present in the oracle's cases.
inline GenerateParams llada_params_of(const nlohmann::json& kw) {
  GenerateParams p;
  p.steps = kw["steps"];
  p.gen_length = kw["gen_length"];
  p.block_length = kw["block_length"];
  p.temperature = kw["temperature"];
  p.cfg_scale = kw["cfg_scale"];
  p.remasking = kw["remasking"] == "random" ? Remasking::kRandom : Remasking::kLowConfidence;
  p.logits_eos_inf = kw["logits_eos_inf"];
  p.confidence_eos_eot_inf = kw["confidence_eos_eot_inf"];
  return p;
}

// Dream diffusion_generate(): omitted keywords take the reference's effective defaults (oracle README §9).
inline GenerateParams dream_params_of(const nlohmann::json& kw) {
  GenerateParams p;
  p.gen_length = kw["max_new_tokens"];
  p.steps = kw["steps"];
  p.temperature = kw.value("temperature", 1.0);  // omitted = 1.0, the config leak (oracle README §9.2)
  const std::string alg = kw.value("alg", "origin");
  if (alg == "origin") {
    p.unmask = Unmask::kRandom;
    p.transfer = Transfer::kTimestepBernoulli;
  } else {
    p.unmask = alg == "maskgit_plus"  ? Unmask::kConfidence
               : alg == "topk_margin" ? Unmask::kMargin
                                      : Unmask::kEntropy;
    p.transfer = Transfer::kTimestep;
  }
  if (kw.contains("top_k")) p.top_k = kw["top_k"].is_null() ? 0 : kw["top_k"].get<int64_t>();
  if (kw.contains("top_p") && !kw["top_p"].is_null()) p.top_p = kw["top_p"];
  if (kw.contains("alg_temp") && !kw["alg_temp"].is_null()) p.alg_temp = kw["alg_temp"];
  if (kw.contains("eps")) p.eps = kw["eps"];
  return p;
}

inline std::vector<std::vector<int32_t>> prompts_of(const nlohmann::json& c) {
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& row : c["prompt"]) prompts.push_back(row.get<std::vector<int32_t>>());
  return prompts;
}

}  // namespace dllm::test
