// Which token each masked position would take, and how sure the model is: the "which positions to reveal" axis.
#pragma once

#include <cstdint>
#include <span>

#include "denoise/rng.h"

namespace dllm {

struct Prediction {
  int32_t token = 0;
  double confidence = 0;  // the score positions compete on; higher is committed first
};

struct PredictionOptions {
  double temperature = 0;      // > 0: Gumbel-max on logits / T in float64 (LLaDA add_gumbel_noise)
  bool random_confidence = false;  // LLaDA remasking='random': confidence ~ U[0,1)
  int32_t suppress_token = -1;     // logits_eos_inf: this logit is -inf before everything else
  // confidence_eos_eot_inf: these logits are -inf in the softmax that gives the confidence (not in the argmax).
  int32_t confidence_exclude[2] = {-1, -1};
};

// LLaDA low-confidence / random remasking on one position's logits.
Prediction predict_llada(std::span<const float> logits, const PredictionOptions& options, Rng& rng);

}  // namespace dllm
