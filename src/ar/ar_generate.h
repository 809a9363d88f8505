// dllm::generate() for autoregressive models (ModelInfo::autoregressive): each prompt decoded left to right,
// one token per forward after a one-forward prefill, with the KV cache (ArSession). GenerateParams supplies
// gen_length (the most new tokens), temperature / top_k / top_p / seed (TokenSampling) and stop_ids (nullopt:
// the model's end-of-generation ids; empty: never stop). The diffusion-only settings are rejected by name.
// One StepEvent per token: canvas = the tokens so far, committed = the new one, all of it final.
#pragma once

#include <vector>

#include "dllm/dllm.h"

namespace dllm {

GenerateResult generate_autoregressive(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                       const GenerateParams& params, const StepCallback& on_step);

// Settings that only mean something to a denoising loop (steps, block_length, cfg_scale, the strategy axes,
// ...) are an error for an autoregressive model, not silently ignored; so are out-of-range sampling values.
void reject_diffusion_settings(const ModelInfo& info, const GenerateParams& params);

// The ids that end a row: params.stop_ids when given, else the model's eog_ids (EOS / EOT when that is
// empty).
std::vector<int32_t> autoregressive_stop_ids(const ModelInfo& info, const GenerateParams& params);

}  // namespace dllm
