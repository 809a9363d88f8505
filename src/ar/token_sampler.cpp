#include "ar/token_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace dllm {

int32_t argmax_token(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

void token_probabilities(std::span<const float> logits, const TokenSampling& s, std::span<float> out) {
  const auto vocab = static_cast<int64_t>(logits.size());
  std::fill(out.begin(), out.end(), 0.0f);
  if (s.temperature <= 0) {
    out[argmax_token(logits)] = 1.0f;
    return;
  }
  // Ids by logit, best first (ties to the lower id), cut by top-k, then softmax(x / T) over the survivors in
  // double, cut by top-p (the first ids whose cumulative probability reaches p, at least one).
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  int64_t keep = s.top_k > 0 ? std::min(s.top_k, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const double max = logits[order[0]] / s.temperature;
  std::vector<double> p(static_cast<size_t>(keep));
  double sum = 0;
  for (int64_t i = 0; i < keep; ++i) sum += p[i] = std::exp(logits[order[i]] / s.temperature - max);
  if (s.top_p < 1.0) {
    double cum = 0;
    int64_t n = 0;
    while (n < keep) {
      cum += p[n++] / sum;
      if (cum >= s.top_p) break;
    }
    keep = n;
    sum = 0;
    for (int64_t i = 0; i < keep; ++i) sum += p[i];
  }
  for (int64_t i = 0; i < keep; ++i) out[order[i]] = static_cast<float>(p[i] / sum);
}

int32_t sample_token(std::span<const float> logits, const TokenSampling& s, Rng& rng) {
  if (s.temperature <= 0) return argmax_token(logits);
  std::vector<float> p(logits.size());
  token_probabilities(logits, s, p);
  // Inverse CDF of one uniform draw over the kept ids in id order.
  const double u = rng.uniform();
  double cum = 0;
  int32_t last = 0;
  for (size_t v = 0; v < p.size(); ++v) {
    if (p[v] <= 0) continue;
    last = static_cast<int32_t>(v);
    cum += p[v];
    if (u < cum) return last;
  }
  return last;
}

}  // namespace dllm
