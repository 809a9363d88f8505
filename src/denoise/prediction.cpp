#include "denoise/prediction.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "denoise/sampler.h"
#include "kernels/simd_math.h"

namespace dllm {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Σ exp(x[i] - max) over [begin, end). Over a 100k+ vocabulary per position per step this dominates sampling,
// so it runs in f32 lanes, accumulated in double per chunk (relative error ~1e-7, far below the margins that
// order positions).
double sum_exp(const float* x, int64_t begin, int64_t end, double max) {
  double sum = 0;
  int64_t v = begin;
  const __m256 vmax = _mm256_set1_ps(static_cast<float>(max));
  while (v + 8 <= end) {
    __m256 acc = _mm256_setzero_ps();
    const int64_t chunk_end = std::min(end, v + 1024);
    for (; v + 8 <= chunk_end; v += 8)
      acc = _mm256_add_ps(acc, exp256(_mm256_sub_ps(_mm256_loadu_ps(x + v), vmax)));
    sum += hsum256(acc);
  }
  for (; v < end; ++v) sum += std::exp(x[v] - max);
  return sum;
}

// Margin and negative entropy of the distribution softmax(x) restricted to the ids `keep` says yes to.
template <class Keep>
void score_distribution(const float* x, int64_t vocab, double max, double sum, Keep keep, Unmask score,
                        Prediction& p) {
  if (score == Unmask::kMargin) {
    double top1 = 0, top2 = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      if (!keep(v)) continue;
      const double q = std::exp(x[v] - max) / sum;
      if (q > top1)
        top2 = top1, top1 = q;
      else if (q > top2)
        top2 = q;
    }
    p.confidence = top1 - top2;
  } else if (score == Unmask::kEntropy) {
    double h = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      if (!keep(v)) continue;
      const double q = std::exp(x[v] - max) / sum;
      h += q * std::log(q + 1e-10);
    }
    p.confidence = h;
  }
}

Prediction predict_llada(std::span<const float> logits, const PredictionOptions& o, Rng& rng) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  auto logit = [&](int64_t v) -> double { return v == o.suppress_token ? kNegInf : logits[v]; };

  Prediction p;
  // x0 = argmax(logits) at T = 0, else argmax(exp(logits) / (-log U)^T) in float64; ties go to the first
  // index.
  if (o.temperature <= 0) {
    double best = kNegInf;
    for (int64_t v = 0; v < vocab; ++v)
      if (logit(v) > best) best = logit(v), p.token = static_cast<int32_t>(v);
  } else {
    p.token = sample_gumbel_max(logits, o.suppress_token, o.temperature, rng);
  }

  if (o.score == Unmask::kRandom) {
    p.confidence = rng.uniform();
    return p;
  }
  if (o.score == Unmask::kSequential) return p;  // every position scores 0: the leftmost goes first
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
  double sum = 0;
  int64_t begin = 0;
  for (int64_t id : excluded) {
    sum += sum_exp(logits.data(), begin, id, max);
    begin = id + 1;
  }
  sum += sum_exp(logits.data(), begin, vocab, max);
  if (o.score == Unmask::kConfidence) {
    // probability 0 when x0 is excluded (e.g. x0 = EoT under confidence_eos_eot_inf)
    p.confidence = is_excluded(p.token) ? 0.0 : std::exp(logits[p.token] - max) / sum;
    return p;
  }
  score_distribution(
      logits.data(), vocab, max, sum, [&](int64_t v) { return !is_excluded(v); }, o.score, p);
  return p;
}

Prediction predict_dream(std::span<const float> raw, const PredictionOptions& o, Rng& rng) {
  const int64_t vocab = static_cast<int64_t>(raw.size());
  std::vector<float> x(raw.begin(), raw.end());
  if (o.suppress_token >= 0 && o.suppress_token < vocab)
    x[o.suppress_token] = -std::numeric_limits<float>::infinity();
  if (o.temperature > 0) {
    const float t = static_cast<float>(o.temperature);
    for (float& v : x) v /= t;
  }
  std::vector<uint8_t> keep(static_cast<size_t>(vocab), 1);
  if (o.top_p < 1.0) {
    // Sorted descending; remove where the cumulative probability (of the tokens before, i.e. shifted right by
    // one) already exceeds top_p: the first token always stays.
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
    const double max = x[order[0]];
    const double sum = sum_exp(x.data(), 0, vocab, max);
    double cum = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      if (i > 0 && cum > o.top_p) keep[order[i]] = 0;
      cum += std::exp(x[order[i]] - max) / sum;
    }
  }
  if (o.top_k > 0 && o.top_k < vocab) {
    // Remove every logit below the k-th largest (ties with it stay), among what top_p kept (removed ones sit
    // at finfo.min, below any kept logit).
    std::vector<float> kept;
    for (int64_t v = 0; v < vocab; ++v) kept.push_back(keep[v] ? x[v] : std::numeric_limits<float>::lowest());
    std::nth_element(kept.begin(), kept.begin() + (o.top_k - 1), kept.end(), std::greater<float>());
    const float kth = kept[o.top_k - 1];
    for (int64_t v = 0; v < vocab; ++v)
      if (x[v] < kth) keep[v] = 0;
  }
  double max = kNegInf;
  for (int64_t v = 0; v < vocab; ++v)
    if (keep[v]) max = std::max(max, static_cast<double>(x[v]));
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v)
    if (keep[v]) sum += std::exp(x[v] - max);

  Prediction p;
  if (o.temperature > 0) {
    p.token = sample_categorical(x, keep, max, sum, rng);
  } else {
    double best = kNegInf;
    for (int64_t v = 0; v < vocab; ++v)
      if (keep[v] && x[v] > best) best = x[v], p.token = static_cast<int32_t>(v);
  }
  if (o.score == Unmask::kRandom) {
    p.confidence = rng.uniform();
  } else if (o.score == Unmask::kSequential) {
    p.confidence = 0;  // every position ties: the leftmost goes first
  } else if (o.score == Unmask::kConfidence) {
    p.confidence = std::exp(x[p.token] - max) / sum;
  } else {
    score_distribution(
        x.data(), vocab, max, sum, [&](int64_t v) { return keep[v] != 0; }, o.score, p);
  }
  return p;
}

}  // namespace

Prediction predict(std::span<const float> logits, const PredictionOptions& options, Rng& rng) {
  return options.rule == TokenRule::kLlada ? predict_llada(logits, options, rng)
                                           : predict_dream(logits, options, rng);
}

Prediction prediction_from_stats(const LogitStats& stats, Unmask score, Rng& rng) {
  Prediction p;
  p.token = stats.argmax;
  switch (score) {
    case Unmask::kConfidence:
      p.confidence = stats.p_max;
      break;
    case Unmask::kMargin:
      p.confidence = stats.margin;
      break;
    case Unmask::kEntropy:
      p.confidence = stats.neg_entropy;
      break;
    case Unmask::kRandom:
      p.confidence = rng.uniform();
      break;
    default:  // kSequential: every position ties, the leftmost goes first
      p.confidence = 0;
  }
  return p;
}

}  // namespace dllm
