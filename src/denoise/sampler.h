// The random draws of the denoising loop, one small file each (sample_<name>.cpp):
//   which positions: sample_bernoulli (Dream alg=origin: each one with probability p), sample_multinomial
//                    (alg_temp > 0: k of them by softmax(score / alg_temp), without replacement);
//   which token:     sample_gumbel_max (LLaDA, temperature > 0), sample_categorical (Dream, temperature > 0).
// Each takes the Rng of its stream (denoiser.cpp seeds one per row or position), so the order in which it
// draws is part of its contract: the golden tests pin it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"

namespace dllm {

// The positions of `eligible` (in order) each kept when a uniform draw is < p; one draw per position.
std::vector<int64_t> sample_bernoulli(std::span<const int64_t> eligible, float p, Rng& rng);

// k of `ranked` (positions ordered by score, best first; scores[i] is ranked[i]'s) drawn one after another
// from softmax(score / temperature) without replacement, in the order drawn. k <= ranked.size(), temperature
// > 0.
std::vector<int64_t> sample_multinomial(std::span<const int64_t> ranked, std::span<const double> scores,
                                        int64_t k, double temperature, Rng& rng);

// argmax over v of exp(logit_v) / (-log U_v)^temperature in float64 (LLaDA's add_gumbel_noise then argmax;
// one draw per vocabulary entry in order; ties to the first). `suppress` (>= 0) is a logit at -inf.
int32_t sample_gumbel_max(std::span<const float> logits, int32_t suppress, double temperature, Rng& rng);

// Categorical(softmax(x)) over the ids `keep` says yes to, by the inverse CDF of one uniform; max / sum are
// the kept ids' max and Σ exp(x - max).
int32_t sample_categorical(std::span<const float> x, std::span<const uint8_t> keep, double max, double sum,
                           Rng& rng);

}  // namespace dllm
