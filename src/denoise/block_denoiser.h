// The generation loops of the block-diffusion families (LLaDA2.0, LLaDA2.1, SDAR) as a steppable object, the
// counterpart of Denoiser (denoise/denoiser.h) for models with block-causal attention:
//
//   BlockDenoiser d(model.info(), prompt, params);   // one prompt (the official loops are batch-1)
//   while (!d.done()) {
//     std::vector<float> logits = model.forward(d.plan().input()).value();
//     d.step(logits);
//     if (!callback(d.event())) d.cancel();
//   }
//   GenerateResult r = d.result();                   // one row: outputs, canvases, forwards
//
// The canvas is the prompt + mask ids up to a whole number of blocks; the block grid is aligned to position
// 0, so the first decoded block may hold the prompt's tail. With the block cache (CacheMode::kBlock, the
// default) complete prompt blocks are prefilled once (CacheOp::kExtend, all appended), each denoising step
// runs only the current block (kExtend, nothing appended) and a finished block is run once more to append its
// K/V (skipped when no block follows). Without it (kNone) every step runs x[0, (b+1)B) with attention_block =
// B and logits for the block, as the LLaDA2 references do. Both give the same tokens. plan() may be a prefill
// / commit forward whose logits step() ignores. docs/denoising.md "Block diffusion" describes the loops and
// deviations.
#pragma once

#include <span>
#include <vector>

#include "cache/kv_cache.h"
#include "core/rng.h"
#include "denoise/block_sample.h"
#include "denoise/denoiser.h"
#include "dllm/dllm.h"

namespace dllm {

enum class SdarRemasking { kSequential, kLowConfidenceStatic, kLowConfidenceDynamic };

// Everything the constructor resolved from GenerateParams + the model.
struct BlockSettings {
  BlockLoop loop = BlockLoop::kLlada21;  // never kDefault
  SdarRemasking remasking = SdarRemasking::kLowConfidenceDynamic;
  BlockSampling sampling;
  int64_t block_length = 32, gen_length = 0;
  int64_t steps = 0;              // LLaDA2.0: iterations per block at most; SDAR: denoising steps per block
  std::vector<int64_t> schedule;  // LLaDA2.0 / SDAR: commits per step (over block_length)
  double threshold = 0.95, editing_threshold = 0.9;
  int64_t max_post_steps = 16, num_to_transfer = 1;
  bool eos_early_stop = false;
  bool cached = true;
  std::vector<int32_t> stop_ids;  // SDAR
};
BlockSettings resolve_block_settings(const ModelInfo& info, const GenerateParams& params);

class BlockDenoiser {
 public:
  BlockDenoiser(const ModelInfo& info, const std::vector<int32_t>& prompt, const GenerateParams& params,
                int64_t row = 0);

  bool done() const { return done_; }
  const ForwardPlan& plan();
  void step(std::span<const float> logits);
  // The step from each logits row's LogitStats instead (Model::forward_stats): only where takes_stats().
  void step(std::span<const LogitStats> stats);
  // Greedy draws whose probability is the unfiltered softmax's (temperature 0, and no top-k / top-p filter or
  // LLaDA2.1's raw confidence): the argmax and its probability are all a step reads of the logits.
  bool takes_stats() const;
  void cancel();

  const StepEvent& event() const { return event_; }
  GenerateResult result() const;
  const BlockSettings& settings() const { return s_; }
  const std::vector<int32_t>& canvas() const { return x_; }

 private:
  enum class Phase { kPrefill, kDenoise, kCommit };
  void start_block();
  void advance();              // runs the no-forward decisions until a forward is needed or the loop ends
  bool block_wants_forward();  // the loop's test at the start of an iteration
  void end_block();
  // step() with `rows` rows given (logits or stats), draw(i) the token and probability of block position i.
  template <class Draw>
  void step_with(int64_t rows, Draw&& draw);
  template <class Draw>
  void denoise_step(Draw&& draw);
  bool block_has_mask() const;
  void finish() { done_ = true; }

  ModelInfo info_;
  BlockSettings s_;
  int64_t row_ = 0, P_ = 0, T_ = 0, B_ = 0, num_blocks_ = 0;
  std::vector<int32_t> x_;
  Rng rng_;
  Phase phase_ = Phase::kDenoise;
  int64_t block_ = 0, iter_ = 0, post_steps_ = 0;
  bool block_over_ = false;  // LLaDA2.1: an iteration with no mask and no edit
  int64_t early_end_ = -1;   // LLaDA2.0 eos_early_stop: canvas end of the output
  int64_t forwards_ = 0, forward_tokens_ = 0;
  bool done_ = false, cancelled_ = false, planned_ = false;
  ForwardPlan plan_;
  KvCache cache_;
  std::vector<std::vector<int32_t>> event_canvas_;
  std::vector<std::vector<int64_t>> committed_, edited_;
  StepEvent event_;
};

}  // namespace dllm
