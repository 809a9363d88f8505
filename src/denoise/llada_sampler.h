// LLaDA's generate(): semi-autoregressive blocks, a uniform per-block schedule, low-confidence or random remasking,
// Gumbel-max temperature and classifier-free guidance, exactly as the official code (see docs/denoising.md).
#pragma once

#include "dllm/dllm.h"

namespace dllm {

GenerateResult generate_llada(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                              const GenerateParams& params, const StepCallback& on_step);

}  // namespace dllm
