// make_canvas_edit_loop: score -> fill -> refine rounds, each phase a loop of its own behind one DenoiseLoop.
#include "denoise/canvas_edit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace dllm {

int64_t refine_tokens_per_round(int64_t editable, int64_t tokens_per_round) {
  const int64_t k = tokens_per_round > 0 ? tokens_per_round : std::max<int64_t>(1, editable / 4);
  return std::min(k, editable);
}

namespace {

class CanvasEditLoop final : public DenoiseLoop {
 public:
  CanvasEditLoop(const ModelInfo& info, CanvasEdit edit, const GenerateParams& params)
      : info_(info), params_(params), edit_(std::move(edit)) {
    if (info_.block_size > 0)
      fail("canvas edit: ", info_.architecture,
           " is a block-diffusion family: its attention is block-causal, so a span could not see the text "
           "after it");
    if (info_.autoregressive) fail("canvas edit: ", info_.architecture, " is autoregressive");
    if (edit_.rounds < 0) fail("canvas edit: refine rounds must be >= 0, got ", edit_.rounds);
    if (edit_.tokens_per_round < 0)
      fail("canvas edit: refine tokens must be >= 0, got ", edit_.tokens_per_round);
    mask_ = params_.mask_id >= 0 ? params_.mask_id : info_.mask_id;
    if (mask_ < 0) fail("canvas edit: the model has no mask id (give mask_id)");
    std::vector<int32_t>& c = edit_.canvas;
    if (edit_.editable.empty())
      for (int32_t t : c) edit_.editable.push_back(t == mask_);
    if (edit_.editable.size() != c.size())
      fail("canvas edit: ", edit_.editable.size(), " editable flags for a canvas of ", c.size());
    for (size_t i = 0; i < c.size(); ++i)
      if (c[i] == mask_ && !edit_.editable[i])
        fail("canvas edit: position ", i, " is a mask but not editable");
    for (size_t i = 0; i < c.size(); ++i)
      if (edit_.editable[i]) editable_.push_back(static_cast<int64_t>(i));
    if (editable_.empty()) fail("canvas edit: nothing to edit (no mask and no editable span)");
    const bool any_mask = std::find(c.begin(), c.end(), mask_) != c.end();
    if (!any_mask && edit_.rounds == 0) fail("canvas edit: nothing to do (no mask and no refine round)");
    k_ = refine_tokens_per_round(static_cast<int64_t>(editable_.size()), edit_.tokens_per_round);
    score_.assign(c.size(), std::numeric_limits<double>::infinity());
    // Tokens already there that refine may replace get a score from the model first.
    scoring_ = edit_.rounds > 0 &&
               std::any_of(editable_.begin(), editable_.end(), [&](int64_t p) { return c[p] != mask_; });
    if (scoring_) {
      build_score_plan();
    } else {
      start_fill();
    }
  }

  bool done() const override { return done_; }

  const ForwardPlan& plan() override {
    if (done_) fail("canvas edit: the edit is over");
    if (scoring_) return score_plan_;
    if (pending_round_ || inner_->done()) next_phase();  // a finished phase lived on for its last event()
    return inner_->plan();
  }

  // Scoring a canvas's own tokens reads their probabilities, not the argmax's: edits always take the logits.
  bool takes_stats() override { return false; }
  void step(std::span<const LogitStats>) override {
    fail("canvas edit: a step reads the logits, not their stats");
  }

  void step(std::span<const float> logits) override {
    if (done_) fail("canvas edit: the edit is over");
    if (scoring_) return score(logits);
    if (pending_round_ || inner_->done()) next_phase();
    inner_->step(logits);
    event_ = inner_->event();
    event_.block = phase_;
    event_.forwards = ++calls_;  // over all phases (the inner loop counts its own)
    if (edit_.rounds > 0) {      // refine may still replace any editable token
      final_ = {editable_.front()};
      event_.final_prefix = &final_;
    }
    if (event_.committed && event_.committed_scores) {
      const auto& pos = (*event_.committed)[0];
      const auto& sc = (*event_.committed_scores)[0];
      for (size_t i = 0; i < pos.size() && i < sc.size(); ++i) score_[pos[i]] = sc[i];
    }
    if (inner_->done()) finish_phase();
  }

  void cancel() override {
    if (done_) return;
    if (inner_ && !inner_->done()) {
      inner_->cancel();
      GenerateResult r = inner_->result();
      forwards_ += r.forwards;
      forward_tokens_ += r.forward_tokens;
    }
    cancelled_ = done_ = true;
  }

  const StepEvent& event() const override { return event_; }

  GenerateResult result() const override {
    GenerateResult r;
    r.outputs = {edit_.canvas};
    r.forwards = forwards_;
    r.forward_tokens = forward_tokens_;
    r.cancelled = cancelled_;
    return r;
  }
  int64_t rows() const override { return 1; }
  int64_t batch_rows() const override { return inner_ ? inner_->batch_rows() : 1; }
  bool block_loop() const override { return false; }

 private:
  void build_score_plan() {
    ForwardPlan& p = score_plan_;
    p.tokens = edit_.canvas;
    for (int64_t i : editable_) p.tokens[i] = mask_;
    p.rows = 1;
    p.len = static_cast<int64_t>(p.tokens.size());
    p.logits_from = 0;
  }

  // The probability the model gives each editable token with all editable positions masked.
  void score(std::span<const float> logits) {
    const int64_t vocab = info_.vocab_size;
    for (int64_t pos : editable_) {
      const int32_t token = edit_.canvas[pos];
      if (token == mask_) continue;  // filled (and scored) by the fill phase
      const int64_t src = info_.shift_logits && pos > 0 ? pos - 1 : pos;
      const float* l = logits.data() + src * vocab;
      const float mx = *std::max_element(l, l + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(l[v]) - mx);
      score_[pos] = std::exp(static_cast<double>(l[token]) - mx) / sum;
    }
    ++forwards_;
    ++calls_;
    forward_tokens_ += score_plan_.len;
    scoring_ = false;
    rows_ = {edit_.canvas};
    committed_ = {{}};
    final_ = {editable_.front()};
    event_ = StepEvent{};
    event_.canvas = &rows_;
    event_.forwards = calls_;
    event_.committed = &committed_;
    event_.final_prefix = &final_;
    const std::vector<int32_t>& c = edit_.canvas;
    if (std::find(c.begin(), c.end(), mask_) != c.end()) {
      start_fill();
    } else {
      pending_round_ = true;  // the first round starts at the next plan() / step()
    }
  }

  void start_fill() {
    phase_ = 0;
    inner_ = make_denoise_loop(info_, {edit_.canvas}, params_, /*infill=*/true);
  }

  // Remasks the k least confident editable tokens (ties: leftmost first) and denoises them as one block.
  void start_round() {
    ++phase_;
    std::vector<int64_t> pos = editable_;
    std::stable_sort(pos.begin(), pos.end(), [&](int64_t a, int64_t b) { return score_[a] < score_[b]; });
    pos.resize(k_);
    std::sort(pos.begin(), pos.end());
    remasked_.clear();
    for (int64_t p : pos) {
      remasked_.push_back({p, edit_.canvas[p]});
      edit_.canvas[p] = mask_;
    }
    GenerateParams rp = params_;
    rp.block_length = 0;  // the remasked positions are scattered: one block over them
    if (rp.steps > k_) rp.steps = k_;
    inner_ = make_denoise_loop(info_, {edit_.canvas}, rp, /*infill=*/true);
  }

  void finish_phase() {
    GenerateResult r = inner_->result();
    edit_.canvas = r.outputs[0];
    forwards_ += r.forwards;
    forward_tokens_ += r.forward_tokens;
    if (r.cancelled) cancelled_ = true;
    if (phase_ > 0) {  // a round: which remasked tokens came back different
      edited_.assign(1, {});
      for (const auto& [p, was] : remasked_)
        if (edit_.canvas[p] != was) edited_[0].push_back(p);
      event_.edited = &edited_;
    }
    if (r.cancelled || phase_ >= edit_.rounds) done_ = true;
  }

  void next_phase() {
    pending_round_ = false;
    start_round();
  }

  ModelInfo info_;
  GenerateParams params_;
  CanvasEdit edit_;
  int32_t mask_ = -1;
  std::vector<int64_t> editable_;
  int64_t k_ = 1;
  std::vector<double> score_;
  bool scoring_ = false, pending_round_ = false, done_ = false, cancelled_ = false;
  ForwardPlan score_plan_;
  std::unique_ptr<DenoiseLoop> inner_;
  int64_t phase_ = 0, forwards_ = 0, forward_tokens_ = 0, calls_ = 0;
  StepEvent event_;
  std::vector<std::vector<int32_t>> rows_;
  std::vector<std::vector<int64_t>> committed_, edited_;
  std::vector<std::pair<int64_t, int32_t>> remasked_;  // this round's positions and the tokens they held
  std::vector<int64_t> final_;
};

}  // namespace

std::unique_ptr<DenoiseLoop> make_canvas_edit_loop(const ModelInfo& info, CanvasEdit edit,
                                                   const GenerateParams& params) {
  if (info.block_size > 0 && !info.autoregressive)
    return make_block_canvas_edit_loop(info, std::move(edit), params);
  return std::make_unique<CanvasEditLoop>(info, std::move(edit), params);
}

}  // namespace dllm
