// The choice of experts for each token of a mixture-of-experts layer, from the router's logits, on the host:
// routing is a few hundred numbers a token, and its order of operations (ties, group limits) is what the
// references' tokens depend on, so every backend routes here and runs only the experts on its device.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "model/transformer.h"

namespace dllm {

// Per expert, the (token, weight) pairs routed to it, tokens ascending. As LLaDA2MoeGate / Qwen3-MoE do it,
// in f32: scores from the router logits [n, experts] (sigmoid or softmax), the choice on scores + expert_bias
// (limited to the best groups, a group scored by its two best experts), the weights from the unbiased scores.
std::vector<std::vector<std::pair<int64_t, float>>> route_tokens(const TransformerConfig::Moe& cfg,
                                                                 std::span<const float> expert_bias,
                                                                 const float* router_logits, int64_t n);

}  // namespace dllm
