// The denoising loop as a steppable per-request object, so that one driver (dllm::generate) and a batching
// scheduler (the server) run the same semantics.
//
//   Denoiser d(model.info(), prompts, params);      // validates params; the canvas is prompt + masks
//   Denoiser d(model.info(), canvases, params, true);  // or (infill): whole canvases, mask ids filled
//   while (!d.done()) {
//     const ForwardPlan& plan = d.plan();          // the forward this step needs: rows, tokens, positions,
//                                                  // validity, logits_from, cache op
//     std::vector<float> logits = model.forward(plan.input()).value();
//     d.step(logits);                              // commit tokens, advance block/step, early stop
//     if (!callback(d.event())) d.cancel();
//   }
//   GenerateResult r = d.result();
//
// A scheduler may run several Denoisers' plans in one batched forward: plans without a cache (CacheOp::kNone)
// are plain rows of tokens with explicit positions/validity, so rows of different lengths can be right-padded
// with validity 0 (a padded token neither attends nor is attended to) and the logits sliced back per
// Denoiser; requests may join or leave between any two steps. Plans with a cache carry their Denoiser's own
// KvCache and are run one Denoiser per forward. step() expects logits in the layout Model::forward returns
// for plan.input(): [plan.rows, plan.len - plan.logits_from, vocab]. A Denoiser is not thread-safe; distinct
// Denoisers are independent. forward_plans (denoise/batch_forward.h) is that batched forward.
//
// The strategy axes (which positions, how many per step, block length, cache) are resolved from
// GenerateParams and the model family in the constructor; docs/denoising.md describes each and the reference
// it reproduces.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "cache/kv_cache.h"
#include "denoise/prediction.h"
#include "dllm/dllm.h"

namespace dllm {

struct ForwardPlan {
  std::vector<int32_t> tokens;     // [rows * len]
  std::vector<int64_t> positions;  // [rows * len], empty = 0..len-1 (+ cache_offset)
  std::vector<uint8_t> valid;      // [rows * len], empty = all valid
  int64_t rows = 0, len = 0;
  int64_t logits_from = 0;  // within the row
  int64_t logits_to = 0;    // within the row; 0 = its end (ForwardInput::logits_to)
  int64_t logits_rows() const { return (logits_to > 0 ? logits_to : len) - logits_from; }
  int64_t canvas_offset = 0;  // canvas position of each row's first token
  CacheOp cache_op = CacheOp::kNone;
  KvCache* cache = nullptr;
  int64_t cache_append = 0;     // kExtend (block loops)
  int64_t attention_block = 0;  // > 0: block-causal (block loops); such a plan runs alone
  ForwardInput input() const;
};

// Everything the constructor resolved from GenerateParams + the model family.
struct DenoiseSettings {
  PredictionOptions prediction;
  Transfer transfer = Transfer::kUniform;
  int64_t num_blocks = 1, block_length = 0, steps_per_block = 0;
  // Transfer::kLlamaCli with a block length: blocks counted over the whole canvas, starting at the prompt's
  // end (num_blocks and steps_per_block are set once the prompt length is known).
  bool canvas_blocks = false;
  double threshold = 0.9, factor = 1.0, alg_temp = 0, eps = 1e-3;
  bool cfg = false, shift = false;
  CacheMode cache = CacheMode::kNone;
  int64_t cache_refresh = 0;
};
DenoiseSettings resolve_settings(const ModelInfo& info, const GenerateParams& params);

// The model's info with GenerateParams::mask_id / eos_id put in (the official generate()s take them as
// arguments); fails naming the value when one is outside the vocabulary, or when no mask id is known at all.
ModelInfo with_token_overrides(const ModelInfo& info, const GenerateParams& params);

class Denoiser {
 public:
  // infill = false: each row is a prompt; the canvas is the left-padded prompt + params.gen_length masks.
  // infill = true: each row is a whole canvas (equal lengths, equal numbers of mask ids); its masked
  // positions are the generated region (gen_length = their number; blocks are runs of block_length of them,
  // left to right), and the outputs / step events are the whole canvas. dllm::infill documents the semantics.
  Denoiser(const ModelInfo& info, const std::vector<std::vector<int32_t>>& prompts,
           const GenerateParams& params, bool infill = false);

  bool done() const { return done_; }
  // The forward this step needs; built once per step (asking again before step() returns the same plan).
  const ForwardPlan& plan();
  void step(std::span<const float> logits);
  // The step from each logits row's LogitStats instead (Model::forward_stats): only where takes_stats().
  void step(std::span<const LogitStats> stats);
  // The token rule is the argmax and the score one of the softmax's statistics (or no read of the logits at
  // all): temperature 0, no classifier-free guidance, no suppressed or excluded ids, no top-k / top-p filter.
  bool takes_stats() const;
  void cancel();

  const StepEvent& event() const { return event_; }  // of the last step()
  GenerateResult result() const;
  const DenoiseSettings& settings() const { return s_; }
  int64_t rows() const { return batch_; }
  int64_t plans_built() const { return plans_; }  // one per step

 private:
  // The parts of a step, in order: guide (cfg), eligible, predict_positions, step_counts, choose per row.
  struct Eligible {
    std::vector<int64_t> lo_of, hi_of;  // row b's eligible canvas range
    int64_t lo = 0, width = 0;          // their union: pred_ holds [lo, lo + width) per row
  };
  struct StepCounts {
    int64_t timestep_k = 0;   // kTimestep
    float p_transfer = 1.0f;  // kTimestepBernoulli
  };
  void build_plan();
  const float* guide(const float* logits, int64_t span, std::vector<float>& combined) const;
  Eligible eligible(bool reuse) const;
  // pred_ of every eligible position, predict(pos, row) giving it from the row of logits (or stats) it reads.
  template <class Predict>
  void predict_positions(const Eligible& e, Predict&& predict);
  // step() once the rows (of logits or stats) are checked: predict(row, rng) makes a position's Prediction.
  template <class Predict>
  void step_with(Predict&& predict);
  StepCounts step_counts(const Eligible& e) const;
  std::vector<int64_t> choose(int64_t row, const Eligible& e, const StepCounts& n) const;

  void init_infill(const std::vector<std::vector<int32_t>>& canvases);
  void start_block();
  int64_t block_begin(int64_t row) const;  // canvas range of the row's current block
  int64_t block_end(int64_t row) const;
  bool block_finished() const;
  void start_llama_cli_blocks();
  int64_t count_masks(int64_t row, int64_t lo, int64_t hi) const;
  void check_stop_at_eos(int64_t row);

  ModelInfo info_;
  GenerateParams params_;
  DenoiseSettings s_;
  int64_t batch_ = 0, prompt_len_ = 0, total_len_ = 0, first_mask_ = 0;  // infill: prompt_len_ = 0
  std::vector<std::vector<int32_t>> x_;
  std::vector<std::vector<int64_t>> slots_;  // per row: canvas positions of the generated region, ascending
  std::vector<std::vector<uint8_t>> is_prompt_;
  std::vector<int64_t> positions_;           // [batch * total] Dream padding position ids; empty = 0..total-1
  std::vector<uint8_t> valid_;               // [batch * total]; empty = all valid
  std::vector<uint8_t> finished_;            // stop_at_eos
  std::vector<std::vector<int64_t>> quota_;  // kUniform, per row per step of the current block
  std::vector<float> timesteps_;             // kTimestep*
  int64_t block_ = 0, step_ = 0, forwards_ = 0, forward_tokens_ = 0, plans_ = 0;
  bool done_ = false, cancelled_ = false, planned_ = false;
  ForwardPlan plan_;
  KvCache cache_;
  std::vector<Prediction> pred_;
  std::vector<std::vector<int32_t>> canvas_;
  std::vector<std::vector<int64_t>> committed_;
  std::vector<std::vector<double>> committed_scores_;  // parallel to committed_
  StepEvent event_;
};

}  // namespace dllm
