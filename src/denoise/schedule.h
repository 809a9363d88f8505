// How many masked positions to commit per step: the "how many" axis of docs/denoising.md (Transfer). Each
// rule is a pure function of the step and the confidences, in its own file (schedule_<rule>.cpp), so it can
// be combined with any "which positions" rule and any block length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace dllm {

// LLaDA's get_num_transfer_tokens: `masked // steps` per step, the first `masked % steps` steps get one more.
std::vector<int64_t> uniform_transfer_counts(int64_t masked, int64_t steps);

// Dream's torch.linspace(1, eps, steps + 1) in float32, evaluated as torch's CPU kernel does
// (start + step*i for the first half, end - step*(n-1-i) for the second).
std::vector<float> dream_timesteps(int64_t steps, double eps);

// Dream: int(mean_masked * (1 - s/t)) in float32 with truncation; every mask on the last step.
int64_t timestep_transfer_count(float mean_masked, float t, float s, bool last_step);

// Dream alg=origin: the probability 1 - s/t with which each masked position is revealed (1 on the last step).
float timestep_bernoulli_probability(float t, float s, bool last_step);

// llama-diffusion-cli's timestep rule: (int)(masked * (1 - s/t)) with t = 1 - step/steps * (1 - eps) and s
// the same at step + 1, in f32 as its C++ computes it; every mask on the last step.
int64_t llama_cli_timestep_count(int64_t step, int64_t steps, int64_t masked, float eps);

// Fast-dLLM threshold: the best position plus every other whose confidence >= tau. `sorted` is descending.
int64_t threshold_count(std::span<const double> sorted, double tau);

// Fast-dLLM factor rule: the largest n with (n+1)(1 - c_n) < factor, c_n the n-th best confidence (1-based);
// at least 1. `sorted` is descending.
int64_t factor_count(std::span<const double> sorted, double factor);

}  // namespace dllm
