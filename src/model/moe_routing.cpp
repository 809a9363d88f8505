#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace dllm {

std::vector<std::vector<std::pair<int64_t, float>>> route_tokens(const TransformerConfig::Moe& cfg,
                                                                 std::span<const float> expert_bias,
                                                                 const float* router_logits, int64_t n) {
  const int64_t E = cfg.experts, K = cfg.used;
  const bool sigmoid = cfg.gating == TransformerConfig::Moe::Gating::kSigmoid;
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(static_cast<size_t>(E));  // (token, weight)
  std::vector<float> score(static_cast<size_t>(E)), choice(static_cast<size_t>(E));
  std::vector<int64_t> order(static_cast<size_t>(E));
  std::vector<std::pair<float, int64_t>> group(static_cast<size_t>(cfg.groups));
  std::vector<uint8_t> keep(static_cast<size_t>(cfg.groups));
  const int64_t per_group = E / cfg.groups;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  auto better = [](float a, int64_t ia, float b, int64_t ib) { return a > b || (a == b && ia < ib); };
  for (int64_t t = 0; t < n; ++t) {
    const float* logit = router_logits + t * E;
    if (sigmoid) {
      for (int64_t e = 0; e < E; ++e) score[e] = 1.0f / (1.0f + std::exp(-logit[e]));
    } else {
      const float max = *std::max_element(logit, logit + E);
      float sum = 0;
      for (int64_t e = 0; e < E; ++e) sum += (score[e] = std::exp(logit[e] - max));
      for (int64_t e = 0; e < E; ++e) score[e] /= sum;
    }
    for (int64_t e = 0; e < E; ++e) choice[e] = score[e] + (expert_bias.empty() ? 0.0f : expert_bias[e]);
    if (cfg.groups > 1 && cfg.groups_used < cfg.groups) {
      for (int64_t g = 0; g < cfg.groups; ++g) {
        const float* c = choice.data() + g * per_group;
        float best = neg_inf, second = neg_inf;
        for (int64_t e = 0; e < per_group; ++e) {
          if (c[e] > best) {
            second = best;
            best = c[e];
          } else if (c[e] > second) {
            second = c[e];
          }
        }
        group[g] = {best + second, g};
      }
      std::partial_sort(
          group.begin(), group.begin() + cfg.groups_used, group.end(),
          [&](const auto& a, const auto& b) { return better(a.first, a.second, b.first, b.second); });
      std::fill(keep.begin(), keep.end(), 0);
      for (int64_t g = 0; g < cfg.groups_used; ++g) keep[group[g].second] = 1;
      for (int64_t e = 0; e < E; ++e)
        if (!keep[e / per_group]) choice[e] = neg_inf;
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int64_t a, int64_t b) { return better(choice[a], a, choice[b], b); });
    float sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += score[order[k]];
    // The sigmoid router (LLaDA2MoeGate) normalises whenever it picks more than one expert, with +1e-20.
    const bool normalize = sigmoid ? K > 1 : cfg.normalize;
    const float denominator = sigmoid ? sum + 1e-20f : sum;
    for (int64_t k = 0; k < K; ++k) {
      const float weight = normalize ? score[order[k]] / denominator : score[order[k]];
      by_expert[order[k]].emplace_back(t, weight * cfg.routed_scale);
    }
  }

  return by_expert;
}

}  // namespace dllm
