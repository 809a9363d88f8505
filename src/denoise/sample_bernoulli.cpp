// Sampler: Dream alg=origin's independent draw per masked position.
#include "denoise/sampler.h"

namespace dllm {

std::vector<int64_t> sample_bernoulli(std::span<const int64_t> eligible, float p, Rng& rng) {
  std::vector<int64_t> chosen;
  for (int64_t pos : eligible)
    if (rng.uniform() < static_cast<double>(p)) chosen.push_back(pos);
  return chosen;
}

}  // namespace dllm
