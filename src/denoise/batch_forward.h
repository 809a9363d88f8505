// Several Denoisers' plans through one model forward, and the logits back to each: what a batching scheduler
// (src/server/scheduler.cpp) does every step, in one place.
//
//   std::vector<const ForwardPlan*> plans = {&a.plan(), &b.plan()};
//   BatchedLogits out = forward_plans(model, plans);
//   a.step(out.logits[0]);  b.step(out.logits[1]);
#pragma once

#include <span>
#include <vector>

#include "denoise/denoiser.h"

namespace dllm {

struct BatchedLogits {
  std::vector<std::vector<float>> logits;  // per plan, the layout its Denoiser::step expects
  int64_t rows = 0, len = 0;               // of the forward that ran
};

// One plan runs as it is (a cached plan too: its KvCache is its own). Several plans must be uncached
// (CacheOp::kNone): their rows are right-padded to the longest plan with validity 0 (padding attends to
// nothing and nothing attends to it, so each row computes what it would alone) and run in one forward whose
// logits start at the smallest logits_from; each plan gets its own rows and positions back. Throws on a model
// error.
BatchedLogits forward_plans(Model& model, std::span<const ForwardPlan* const> plans);

// The same with each logits row reduced to its LogitStats (Model::forward_stats), for loops that take them.
struct BatchedStats {
  std::vector<std::vector<LogitStats>> stats;  // per plan, one a logits row in the plan's layout
  int64_t rows = 0, len = 0;
};
BatchedStats forward_plans_stats(Model& model, std::span<const ForwardPlan* const> plans);

}  // namespace dllm
