// Sampler: LLaDA's Gumbel-max token draw at temperature > 0 (add_gumbel_noise in float64, then argmax).
#include <cmath>
#include <limits>

#include "denoise/sampler.h"

namespace dllm {

int32_t sample_gumbel_max(std::span<const float> logits, int32_t suppress, double temperature, Rng& rng) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  auto logit = [&](int64_t v) -> double {
    return v == suppress ? -std::numeric_limits<double>::infinity() : logits[v];
  };
  int32_t token = 0;
  double best = -1;
  for (int64_t v = 0; v < vocab; ++v) {
    const double noisy = std::exp(logit(v)) / std::pow(-std::log(rng.uniform()), temperature);
    if (noisy > best) best = noisy, token = static_cast<int32_t>(v);
  }
  return token;
}

}  // namespace dllm
