// Which token each masked position would take, and the score positions compete on: the "which positions to
// reveal" axis of docs/denoising.md. Two families of token rules, as in the references:
//   kLlada: x0 = argmax(logits) (Gumbel-max on logits/T in float64 when T > 0); the distribution scored is
//           softmax(raw logits) in float64.
//   kDream: logits / T (T > 0), then top_p and top_k filters (removed logits get finfo(float).min), then
//           p = softmax; x0 ~ Categorical(p) when T > 0, else argmax(p).
// Scores: confidence p[x0]; margin p_top1 - p_top2; entropy Σ p·log(p + 1e-10) (the negative entropy: higher
// is surer); random U[0,1).
#pragma once

#include <cstdint>
#include <span>

#include "core/rng.h"
#include "dllm/dllm.h"

namespace dllm {

struct Prediction {
  int32_t token = 0;
  double confidence = 0;  // the score positions compete on; higher is committed first
};

enum class TokenRule { kLlada, kDream };

struct PredictionOptions {
  TokenRule rule = TokenRule::kLlada;
  Unmask score = Unmask::kConfidence;  // never kDefault here
  double temperature = 0;
  int64_t top_k = 0;            // kDream: 0 = no filter
  double top_p = 1.0;           // kDream: < 1 filters
  int32_t suppress_token = -1;  // logits_eos_inf: this logit is -inf before everything else
  // confidence_eos_eot_inf: these logits are -inf in the softmax that gives the confidence (not in the
  // argmax).
  int32_t confidence_exclude[2] = {-1, -1};
};

Prediction predict(std::span<const float> logits, const PredictionOptions& options, Rng& rng);

// The same from the row's LogitStats, where the rule needs nothing else (Denoiser::takes_stats: temperature
// 0, no filter, no suppressed or excluded id): the argmax, scored by `score` (kRandom draws from rng as
// predict does).
Prediction prediction_from_stats(const LogitStats& stats, Unmask score, Rng& rng);

}  // namespace dllm
