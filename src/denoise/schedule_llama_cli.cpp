// "How many" rule: llama.cpp's llama-diffusion-cli timestep schedule (its block schedule is
// uniform_transfer_counts over differently laid out blocks: denoiser.cpp).
#include "denoise/schedule.h"

namespace dllm {

namespace {

// 1 - step/steps * (1 - eps), each operation rounded to f32 on its own: llama.cpp's examples are built
// without FMA, and this file with it, so the product is kept out of a fused multiply-subtract.
float llama_cli_time(int64_t step, int64_t steps, float eps) {
  const float fraction = static_cast<float>(step) / static_cast<float>(steps);
  volatile float scaled = fraction * (1.0f - eps);
  return 1.0f - scaled;
}

}  // namespace

int64_t llama_cli_timestep_count(int64_t step, int64_t steps, int64_t masked, float eps) {
  const float t = llama_cli_time(step, steps, eps), s = llama_cli_time(step + 1, steps, eps);
  const float p_transfer = step < steps - 1 ? 1.0f - s / t : 1.0f;
  return static_cast<int64_t>(static_cast<float>(masked) * p_transfer);
}

}  // namespace dllm
