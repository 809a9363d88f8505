#include "denoise/prediction.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/simd_math.h"

namespace dllm {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Σ exp(x[i] - max) over [begin, end). Over a 100k+ vocabulary per position per step this dominates sampling, so it
// runs in f32 lanes, accumulated in double per chunk (relative error ~1e-7, far below the margins that order
// positions).
double sum_exp(const float* x, int64_t begin, int64_t end, double max) {
  double sum = 0;
  int64_t v = begin;
  const __m256 vmax = _mm256_set1_ps(static_cast<float>(max));
  while (v + 8 <= end) {
    __m256 acc = _mm256_setzero_ps();
    const int64_t chunk_end = std::min(end, v + 1024);
    for (; v + 8 <= chunk_end; v += 8) acc = _mm256_add_ps(acc, exp256(_mm256_sub_ps(_mm256_loadu_ps(x + v), vmax)));
    sum += hsum256(acc);
  }
  for (; v < end; ++v) sum += std::exp(x[v] - max);
  return sum;
}

}  // namespace

Prediction predict_llada(std::span<const float> logits, const PredictionOptions& o, Rng& rng) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  auto logit = [&](int64_t v) -> double { return v == o.suppress_token ? kNegInf : logits[v]; };

  Prediction p;
  // x0 = argmax(logits) at T = 0, else argmax(exp(logits) / (-log U)^T) in float64; ties go to the first index.
  if (o.temperature <= 0) {
    double best = kNegInf;
    for (int64_t v = 0; v < vocab; ++v)
      if (logit(v) > best) best = logit(v), p.token = static_cast<int32_t>(v);
  } else {
    double best = -1;
    for (int64_t v = 0; v < vocab; ++v) {
      const double noisy = std::exp(logit(v)) / std::pow(-std::log(rng.uniform()), o.temperature);
      if (noisy > best) best = noisy, p.token = static_cast<int32_t>(v);
    }
  }

  if (o.random_confidence) {
    p.confidence = rng.uniform();
    return p;
  }
  // conf = softmax(logits)[x0] with the suppressed / excluded ids at -inf (they add nothing to the sum).
  std::vector<int64_t> excluded;
  for (int32_t id : {o.suppress_token, o.confidence_exclude[0], o.confidence_exclude[1]})
    if (id >= 0 && id < vocab) excluded.push_back(id);
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  auto is_excluded = [&](int64_t v) { return std::binary_search(excluded.begin(), excluded.end(), v); };

  double max = kNegInf;
  for (int64_t v = 0; v < vocab; ++v)
    if (!is_excluded(v)) max = std::max(max, static_cast<double>(logits[v]));
  if (is_excluded(p.token)) return p;  // probability 0 (e.g. x0 = EoT under confidence_eos_eot_inf)
  double sum = 0;
  int64_t begin = 0;
  for (int64_t id : excluded) {
    sum += sum_exp(logits.data(), begin, id, max);
    begin = id + 1;
  }
  sum += sum_exp(logits.data(), begin, vocab, max);
  p.confidence = std::exp(logits[p.token] - max) / sum;
  return p;
}

}  // namespace dllm
