#include "denoise/batch_forward.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace dllm {

namespace {

// Runs the plans as forward_plans says; run(input) gives `width` values a logits row (vocab_size logits, or
// one LogitStats), which go back to each plan in its own layout.
template <class T, class Run>
std::vector<std::vector<T>> run_plans(Model& model, std::span<const ForwardPlan* const> plans, int64_t width,
                                      int64_t& rows_out, int64_t& len_out, Run&& run) {
  if (plans.empty()) fail("forward_plans: no plan");
  std::vector<std::vector<T>> out(plans.size());
  if (plans.size() == 1) {
    const ForwardPlan& p = *plans[0];
    out[0] = run(p.input());
    rows_out = p.rows;
    len_out = p.len;
    return out;
  }
  int64_t from = INT64_MAX, to = 0, rows = 0, len = 0;
  for (const ForwardPlan* p : plans) {
    if (p->cache_op != CacheOp::kNone) fail("forward_plans: a cached plan runs alone (its cache is its own)");
    if (p->attention_block > 0) fail("forward_plans: a block-causal plan runs alone");
    rows += p->rows;
    len = std::max(len, p->len);
    from = std::min(from, p->logits_from);
    to = std::max(to, p->logits_from + p->logits_rows());
  }
  rows_out = rows;
  len_out = len;
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
  const std::vector<T> all = run(in);
  const int64_t span = to - from;
  r0 = 0;
  for (size_t k = 0; k < plans.size(); ++k) {
    const ForwardPlan& p = *plans[k];
    const int64_t own = p.logits_rows();
    out[k].resize(p.rows * own * width);
    for (int64_t r = 0; r < p.rows; ++r)
      std::copy_n(all.begin() + ((r0 + r) * span + (p.logits_from - from)) * width, own * width,
                  out[k].begin() + r * own * width);
    r0 += p.rows;
  }
  return out;
}

}  // namespace

BatchedLogits forward_plans(Model& model, std::span<const ForwardPlan* const> plans) {
  BatchedLogits out;
  out.logits = run_plans<float>(model, plans, model.info().vocab_size, out.rows, out.len,
                                [&](const ForwardInput& in) { return model.forward(in).value(); });
  return out;
}

BatchedStats forward_plans_stats(Model& model, std::span<const ForwardPlan* const> plans) {
  BatchedStats out;
  out.stats = run_plans<LogitStats>(model, plans, 1, out.rows, out.len,
                                    [&](const ForwardInput& in) { return model.forward_stats(in).value(); });
  return out;
}

}  // namespace dllm
