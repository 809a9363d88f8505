// The next token of an autoregressive model from its logits: argmax at temperature 0 (ties to the lowest id,
// as llama.cpp's greedy decoding and torch.argmax), else a draw from softmax(logits / T) restricted by top-k
// (the k largest) and then top-p (the smallest set of the most likely whose probability reaches p).
#pragma once

#include <cstdint>
#include <span>

#include "core/rng.h"

namespace dllm {

struct TokenSampling {
  double temperature = 0;  // 0 = greedy
  int64_t top_k = 0;       // <= 0: no top-k filter
  double top_p = 1.0;      // >= 1: no top-p filter
};

int32_t argmax_token(std::span<const float> logits);
int32_t sample_token(std::span<const float> logits, const TokenSampling& s, Rng& rng);
// The probabilities sample_token draws from, in full-vocabulary order (0 for filtered ids); greedy gives a
// one-hot. Speculative sampling compares the verifier's and the drafter's.
void token_probabilities(std::span<const float> logits, const TokenSampling& s, std::span<float> out);

}  // namespace dllm
