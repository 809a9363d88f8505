// DiffusionGemma's uniform-state sampler: the reference generate() of transformers'
// generation_diffusion_gemma.py (docs/denoising.md "Uniform-state canvases"). Canvases of canvas_length
// tokens are generated left to right, each conditioned on the encoder's cache of the prompt and the canvases
// before it. A canvas starts as uniform random ids; each step (cur_step = N..1) decodes it, scales the logits
// by a temperature falling from t_max, samples every position, keeps the lowest-entropy samples under the
// entropy bound and renoises the rest; a row stops when its argmax is stable and confident. The canvas
// committed is the last step's argmax. dllm::generate runs this on a model with a CanvasDecoder.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "dllm/dllm.h"

namespace dllm {

// What one step decided, as the reference's log records it (tests compare the two).
struct UniformStepTrace {
  int64_t canvas = 0, step = 0, cur_step = 0;  // step 0, 1, ... while cur_step counts N..1
  float temperature = 0;
  std::span<const int32_t> samples;   // [batch * L] the denoiser canvas (multinomial draws)
  std::span<const float> entropy;     // [batch * L] of the temperature-scaled logits
  std::span<const uint8_t> accepted;  // [batch * L] the entropy-bound mask
  std::span<const uint8_t> stopped;   // [batch] rows done denoising this canvas, after this step
};

struct UniformStateHooks {
  // Fills the Exp(1) variates q [V] of row r (0 .. batch * L - 1, in order, every step) of the multinomial
  // draw (sample = argmax p / q) instead of the Rng or a tape's samples: tests replay torch's own draws.
  std::function<void(int64_t row, std::span<float> q)> exponential;
  std::function<void(const UniformStepTrace&)> trace;
};

// Prompts must have equal length (the reference crashes on left padding). params: uniform_state (unset fields
// from decoder.generation_defaults()), tape (else the seed draws), canvas_ids, seed. Errors name the setting,
// tape entry or row at fault.
Expected<GenerateResult> generate_uniform_state(Model& model, CanvasDecoder& decoder,
                                                const std::vector<std::vector<int32_t>>& prompts,
                                                const GenerateParams& params,
                                                const StepCallback& on_step = {},
                                                const UniformStateHooks& hooks = {});

// The temperature at cur_step of N steps: t_min + (t_max - t_min) * (cur_step / N), in float32 as torch
// evaluates it from an int32 cur_step (bit for bit).
float uniform_state_temperature(double t_min, double t_max, int64_t cur_step, int64_t steps);

// The entropy-bound accept mask of one row (EntropyBoundSampler.accept_canvas): sorted ascending (stable),
// c_k = cumsum_k - H_(k) with the cumsum accumulated in double and rounded to float per element (torch's CPU
// cumsum), accept iff c_k <= (float)bound. The lowest entropy is always accepted.
void entropy_bound_mask(std::span<const float> entropy, double bound, std::span<uint8_t> accepted);

}  // namespace dllm
