#include "denoise/block_sample.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace dllm {

namespace {

// The kept logits after the reference's filters, -inf elsewhere (in double).
std::vector<double> filtered(std::span<const float> logits, double scale, int64_t top_k, double top_p) {
  const int64_t V = static_cast<int64_t>(logits.size());
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<double> x(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) x[v] = static_cast<double>(logits[v]) * scale;
  if (top_k > 0 && top_k < V) {
    std::vector<double> sorted = x;
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<double>());
    const double kth = sorted[static_cast<size_t>(top_k - 1)];
    for (auto& l : x)
      if (l < kth) l = ninf;
  }
  if (top_p < 1.0) {
    std::vector<int64_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
    const double mx = x[order[0]];
    double sum = 0;
    for (double l : x) sum += std::exp(l - mx);
    double cum = 0;
    std::vector<uint8_t> drop(static_cast<size_t>(V), 0);
    for (size_t i = 0; i < order.size(); ++i) {
      // sorted_mask[i] = cumulative(i - 1) > p (shifted right by one; the first is always kept)
      if (i > 0 && cum > top_p) drop[order[i]] = 1;
      cum += std::exp(x[order[i]] - mx) / sum;
    }
    for (int64_t v = 0; v < V; ++v)
      if (drop[v]) x[v] = ninf;
  }
  return x;
}

}  // namespace

BlockDraw block_draw(std::span<const float> logits, const BlockSampling& s, Rng& rng) {
  const int64_t V = static_cast<int64_t>(logits.size());
  BlockDraw d;
  const bool greedy = s.temperature <= 0;
  if (greedy) d.token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const double scale = greedy || s.temperature == 1.0 ? 1.0 : 1.0 / s.temperature;
  const std::vector<double> x = greedy && s.greedy_raw_confidence ? filtered(logits, 1.0, 0, 1.0)
                                                                  : filtered(logits, scale, s.top_k, s.top_p);
  const double mx = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (double l : x) sum += std::exp(l - mx);
  if (!greedy) {
    const double u = rng.uniform() * sum;
    double cum = 0;
    int64_t last = 0;
    d.token = -1;
    for (int64_t v = 0; v < V && d.token < 0; ++v) {
      if (x[v] == -std::numeric_limits<double>::infinity()) continue;
      last = v;
      cum += std::exp(x[v] - mx);
      if (u < cum) d.token = static_cast<int32_t>(v);
    }
    if (d.token < 0) d.token = static_cast<int32_t>(last);
  }
  d.p = std::exp(x[d.token] - mx) / sum;
  return d;
}

}  // namespace dllm
