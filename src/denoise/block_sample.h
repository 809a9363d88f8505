// The token draw of the block-diffusion loops (LLaDA2.x _sample_with_temperature_topk_topp, SDAR
// sample_with_temperature_topk_topp): logits / T (T != 1), top-k (keep logits >= the k-th largest), top-p
// (sorted descending, drop where the cumulative probability before it already exceeds p), softmax, a
// categorical draw; p = the drawn token's probability under that distribution. Temperature 0 is greedy
// (docs/denoising.md "Block diffusion"): the argmax of the logits, with p from the filtered softmax at T = 1
// (LLaDA2.0 / SDAR: what the reference would sample from; with top_k = 1 it is 1.0, the reference's one-hot)
// or from the raw softmax (LLaDA2.1's greedy branch, which ignores the filters).
#pragma once

#include <cstdint>
#include <span>

#include "core/rng.h"

namespace dllm {

struct BlockSampling {
  double temperature = 0;
  int64_t top_k = 0;                   // <= 0: no filter
  double top_p = 1.0;                  // >= 1: no filter
  bool greedy_raw_confidence = false;  // T = 0: p from softmax(raw logits) (LLaDA2.1)
};

struct BlockDraw {
  int32_t token = 0;
  double p = 0;
};

BlockDraw block_draw(std::span<const float> logits, const BlockSampling& s, Rng& rng);

}  // namespace dllm
