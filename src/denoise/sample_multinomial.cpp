// Sampler: Dream's alg_temp > 0, torch.multinomial(softmax(score / alg_temp), k) without replacement.
#include <cmath>
#include <numeric>

#include "denoise/sampler.h"

namespace dllm {

std::vector<int64_t> sample_multinomial(std::span<const int64_t> ranked, std::span<const double> scores,
                                        int64_t k, double temperature, Rng& rng) {
  std::vector<int64_t> chosen;
  std::vector<double> w(ranked.size());
  const double top = scores[0];
  for (size_t j = 0; j < ranked.size(); ++j) w[j] = std::exp((scores[j] - top) / temperature);
  for (int64_t j = 0; j < k; ++j) {
    const double u = rng.uniform() * std::accumulate(w.begin(), w.end(), 0.0);
    double cum = 0;
    size_t pick = ranked.size() - 1;
    for (size_t q = 0; q < ranked.size(); ++q) {
      cum += w[q];
      if (u < cum && w[q] > 0) {
        pick = q;
        break;
      }
    }
    chosen.push_back(ranked[pick]);
    w[pick] = 0;
  }
  return chosen;
}

}  // namespace dllm
