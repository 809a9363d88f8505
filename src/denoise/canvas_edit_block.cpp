// Canvas editing on block-diffusion models (LLaDA2.x, SDAR): LLaDA2.1's own loop (mask-to-token commits plus
// token-to-token edits, then editing passes) run over the blocks that hold editable positions, with every
// other position fixed. A block sees itself and the blocks before it (block-causal attention), so a span is
// redone from the text before it; the text after it is kept, not read.
#include <algorithm>

#include "core/error.h"
#include "core/rng.h"
#include "denoise/block_commit.h"
#include "denoise/block_denoiser.h"
#include "denoise/canvas_edit.h"

namespace dllm {

namespace {

class BlockCanvasEditLoop final : public DenoiseLoop {
 public:
  BlockCanvasEditLoop(const ModelInfo& info, CanvasEdit edit, const GenerateParams& params)
      : info_(with_token_overrides(info, params)), rng_(params.seed), x_(std::move(edit.canvas)) {
    if (params.block_loop != BlockLoop::kDefault && params.block_loop != BlockLoop::kLlada21)
      fail(
          "canvas edit: block-diffusion models are edited with LLaDA2.1's loop (mask-to-token commits and "
          "token-to-token edits); block_loop llada2.0 / sdar have no editing");
    if (edit.rounds < 0) fail("canvas edit: refine rounds must be >= 0, got ", edit.rounds);
    if (edit.tokens_per_round > 0)
      fail(
          "canvas edit: on a block-diffusion model refine rounds are LLaDA2.1's editing passes, which "
          "replace "
          "every token whose new draw has p > editing_threshold: refine_tokens does not apply");
    GenerateParams p = params;
    p.block_loop = BlockLoop::kLlada21;
    p.gen_length = std::max<int64_t>(1, p.gen_length);
    s_ = resolve_block_settings(info, p);  // validates the knobs as generate does
    B_ = s_.block_length;
    rounds_ = edit.rounds;
    mask_ = info_.mask_id;
    if (mask_ < 0) fail("canvas edit: the model has no mask id (give mask_id)");
    editable_ = std::move(edit.editable);
    if (editable_.empty())
      for (int32_t t : x_) editable_.push_back(t == mask_);
    if (editable_.size() != x_.size())
      fail("canvas edit: ", editable_.size(), " editable flags for a canvas of ", x_.size());
    const int64_t T = static_cast<int64_t>(x_.size());
    bool any_mask = false;
    for (int64_t i = 0; i < T; ++i) {
      if (x_[i] == mask_ && !editable_[i]) fail("canvas edit: position ", i, " is a mask but not editable");
      any_mask = any_mask || x_[i] == mask_;
      if (editable_[i] && (blocks_.empty() || blocks_.back() != i / B_)) blocks_.push_back(i / B_);
    }
    if (blocks_.empty()) fail("canvas edit: nothing to edit (no mask and no editable span)");
    if (!any_mask && rounds_ == 0) fail("canvas edit: nothing to do (no mask and no refine round)");
    committed_.resize(1);
    edited_.resize(1);
    rows_.resize(1);
    start_block();
    advance();
  }

  bool done() const override { return done_; }

  const ForwardPlan& plan() override {
    if (done_) fail("canvas edit: the edit is over");
    const int64_t lo = blocks_[b_] * B_, hi = std::min<int64_t>(lo + B_, x_.size());
    plan_ = ForwardPlan{};
    plan_.rows = 1;
    plan_.attention_block = B_;
    plan_.tokens.assign(x_.begin(), x_.begin() + hi);  // uncached: the blocks before it and the block itself
    plan_.len = hi;
    plan_.logits_from = lo;
    return plan_;
  }

  // Scoring a canvas's own tokens reads their probabilities, not the argmax's: edits always take the logits.
  bool takes_stats() override { return false; }
  void step(std::span<const LogitStats>) override {
    fail("canvas edit: a step reads the logits, not their stats");
  }

  void step(std::span<const float> logits) override {
    if (done_) fail("canvas edit: the edit is over");
    const int64_t lo = blocks_[b_] * B_, n = plan_.len - lo, V = info_.vocab_size;
    if (static_cast<int64_t>(logits.size()) != n * V)
      fail("canvas edit: ", logits.size(), " logits, expected ", n, " x ", V);
    ++forwards_;
    forward_tokens_ += plan_.len;
    // LLaDA2.1's iteration (BlockDenoiser::denoise_step) with the editable positions as the candidates.
    std::vector<uint8_t> active(n), editable(n);
    std::vector<int32_t> current(x_.begin() + lo, x_.begin() + lo + n), drawn(current);
    std::vector<double> p(n, 0.0);
    bool any_active = false;
    for (int64_t i = 0; i < n; ++i) {
      active[i] = editable_[lo + i] && current[i] == mask_;
      editable[i] = editable_[lo + i] && !active[i];
      any_active = any_active || active[i];
      if (active[i] || editable[i]) {
        const BlockDraw d = block_draw(logits.subspan(i * V, V), s_.sampling, rng_);
        drawn[i] = d.token;
        p[i] = d.p;
      }
    }
    std::vector<int64_t> commit;
    if (any_active) commit = commit_threshold_topk(p, active, s_.threshold, s_.num_to_transfer);
    const std::vector<int64_t> edits = t2t_edits(current, drawn, p, editable, s_.editing_threshold);
    committed_[0].clear();
    edited_[0].clear();
    for (int64_t i : commit) {
      x_[lo + i] = drawn[i];
      committed_[0].push_back(lo + i);
    }
    for (int64_t i : edits) {
      x_[lo + i] = drawn[i];
      edited_[0].push_back(lo + i);
    }
    ++iter_;
    if (!any_active && edits.empty()) block_over_ = true;
    rows_[0] = x_;
    final_ = {lo};
    event_ = StepEvent{};
    event_.block = post_;  // 0 while the block has masks, r in its r-th editing pass
    event_.step = ++steps_;
    event_.forwards = forwards_;
    event_.canvas = &rows_;
    event_.committed = &committed_;
    event_.edited = &edited_;
    event_.final_prefix = &final_;
    advance();
  }

  void cancel() override { cancelled_ = done_ = true; }
  const StepEvent& event() const override { return event_; }

  GenerateResult result() const override {
    GenerateResult r;
    r.outputs = {x_};
    r.canvases = {x_};
    r.forwards = forwards_;
    r.forward_tokens = forward_tokens_;
    r.cancelled = cancelled_;
    return r;
  }
  int64_t rows() const override { return 1; }
  int64_t batch_rows() const override { return 1; }
  bool block_loop() const override { return true; }  // block-causal plans run alone

 private:
  void start_block() { iter_ = post_ = 0, block_over_ = false; }

  bool block_has_mask() const {
    const int64_t lo = blocks_[b_] * B_, hi = std::min<int64_t>(lo + B_, x_.size());
    for (int64_t i = lo; i < hi; ++i)
      if (editable_[i] && x_[i] == mask_) return true;
    return false;
  }

  // LLaDA2.1's test at the start of an iteration (BlockDenoiser::block_wants_forward), with `rounds` editing
  // passes in place of max_post_steps.
  bool block_wants_forward() {
    if (block_over_) return false;
    if (!block_has_mask()) ++post_;
    if (post_ > rounds_) return false;
    return iter_ < B_ + rounds_;  // the same safety cap as BlockDenoiser's
  }

  void advance() {
    while (!done_ && !block_wants_forward()) {
      if (++b_ == blocks_.size()) {
        done_ = true;
      } else {
        start_block();
      }
    }
  }

  ModelInfo info_;
  BlockSettings s_;
  Rng rng_;
  std::vector<int32_t> x_;
  std::vector<uint8_t> editable_;
  std::vector<int64_t> blocks_;  // the blocks holding editable positions, in order
  int64_t B_ = 32, rounds_ = 0;
  int32_t mask_ = -1;
  size_t b_ = 0;
  int64_t iter_ = 0, post_ = 0, steps_ = 0, forwards_ = 0, forward_tokens_ = 0;
  bool block_over_ = false, done_ = false, cancelled_ = false;
  ForwardPlan plan_;
  StepEvent event_;
  std::vector<std::vector<int32_t>> rows_;
  std::vector<std::vector<int64_t>> committed_, edited_;
  std::vector<int64_t> final_;
};

}  // namespace

std::unique_ptr<DenoiseLoop> make_block_canvas_edit_loop(const ModelInfo& info, CanvasEdit edit,
                                                         const GenerateParams& params) {
  return std::make_unique<BlockCanvasEditLoop>(info, std::move(edit), params);
}

}  // namespace dllm
