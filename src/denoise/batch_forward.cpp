#include "denoise/batch_forward.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace dllm {

BatchedLogits forward_plans(Model& model, std::span<const ForwardPlan* const> plans) {
  if (plans.empty()) fail("forward_plans: no plan");
  BatchedLogits out;
  out.logits.resize(plans.size());
  if (plans.size() == 1) {
    const ForwardPlan& p = *plans[0];
    out.logits[0] = model.forward(p.input()).value();
    out.rows = p.rows;
    out.len = p.len;
    return out;
  }
  int64_t from = INT64_MAX, to = 0;
  for (const ForwardPlan* p : plans) {
    if (p->cache_op != CacheOp::kNone) fail("forward_plans: a cached plan runs alone (its cache is its own)");
    if (p->attention_block > 0) fail("forward_plans: a block-causal plan runs alone");
    out.rows += p->rows;
    out.len = std::max(out.len, p->len);
    from = std::min(from, p->logits_from);
    to = std::max(to, p->logits_from + p->logits_rows());
  }
  const int64_t rows = out.rows, len = out.len;
  std::vector<int32_t> tokens(rows * len, std::max(0, model.info().mask_id));  // padding: any valid id
  std::vector<int64_t> positions(rows * len, 0);
  std::vector<uint8_t> valid(rows * len, 0);
  int64_t r0 = 0;
  for (const ForwardPlan* p : plans) {
    for (int64_t r = 0; r < p->rows; ++r) {
      const int64_t dst = (r0 + r) * len, src = r * p->len;
      std::copy_n(p->tokens.begin() + src, p->len, tokens.begin() + dst);
      for (int64_t i = 0; i < p->len; ++i) {
        positions[dst + i] = p->positions.empty() ? p->canvas_offset + i : p->positions[src + i];
        valid[dst + i] = p->valid.empty() ? 1 : p->valid[src + i];
      }
    }
    r0 += p->rows;
  }
  ForwardInput in;
  in.tokens = tokens;
  in.batch = rows;
  in.logits_from = from;
  in.logits_to = to == len ? 0 : to;
  in.positions = positions;
  in.valid = valid;
  const std::vector<float> logits = model.forward(in).value();
  const int64_t vocab = model.info().vocab_size, span = to - from;
  r0 = 0;
  for (size_t k = 0; k < plans.size(); ++k) {
    const ForwardPlan& p = *plans[k];
    const int64_t own = p.logits_rows();
    out.logits[k].resize(p.rows * own * vocab);
    for (int64_t r = 0; r < p.rows; ++r)
      std::copy_n(logits.begin() + ((r0 + r) * span + (p.logits_from - from)) * vocab, own * vocab,
                  out.logits[k].begin() + r * own * vocab);
    r0 += p.rows;
  }
  return out;
}

}  // namespace dllm
