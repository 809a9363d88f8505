// Sampler: Dream's token draw at temperature > 0, Categorical(probs).sample() by the inverse CDF.
#include <cmath>

#include "denoise/sampler.h"

namespace dllm {

int32_t sample_categorical(std::span<const float> x, std::span<const uint8_t> keep, double max, double sum,
                           Rng& rng) {
  const int64_t vocab = static_cast<int64_t>(x.size());
  const double u = rng.uniform() * sum;
  double cum = 0;
  int64_t last = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    if (!keep[v]) continue;
    last = v;
    cum += std::exp(x[v] - max);
    if (u < cum) return static_cast<int32_t>(v);
  }
  return static_cast<int32_t>(last);
}

}  // namespace dllm
