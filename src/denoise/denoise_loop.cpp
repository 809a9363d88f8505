// make_denoise_loop: Denoiser and a run of BlockDenoisers behind DenoiseLoop.
#include "denoise/denoise_loop.h"

#include <algorithm>

#include "core/error.h"
#include "denoise/block_denoiser.h"

namespace dllm {

namespace {

class BidirectionalLoop final : public DenoiseLoop {
 public:
  BidirectionalLoop(const ModelInfo& info, const std::vector<std::vector<int32_t>>& prompts,
                    const GenerateParams& params, bool infill)
      : d_(info, prompts, params, infill) {}
  bool done() const override { return d_.done(); }
  const ForwardPlan& plan() override { return d_.plan(); }
  void step(std::span<const float> logits) override {
    d_.step(logits);
    after_step();
  }
  bool takes_stats() override { return d_.takes_stats(); }
  void step(std::span<const LogitStats> stats) override {
    d_.step(stats);
    after_step();
  }
  void cancel() override { d_.cancel(); }
  const StepEvent& event() const override { return event_; }
  GenerateResult result() const override { return d_.result(); }
  int64_t rows() const override { return d_.rows(); }
  int64_t batch_rows() const override { return d_.rows() * (d_.settings().cfg ? 2 : 1); }
  bool block_loop() const override { return false; }

 private:
  void after_step() {
    event_ = d_.event();
    final_.clear();
    if (event_.canvas)
      for (const auto& row : *event_.canvas) final_.push_back(static_cast<int64_t>(row.size()));
    event_.final_prefix = &final_;  // a committed token never changes
  }

  Denoiser d_;
  StepEvent event_;
  std::vector<int64_t> final_;
};

// One BlockDenoiser per prompt, one after another (each on its own grid, seeded by its row as
// dllm::generate always did); the outputs are gathered in prompt order.
class BlockLoops final : public DenoiseLoop {
 public:
  BlockLoops(const ModelInfo& info, const std::vector<std::vector<int32_t>>& prompts,
             const GenerateParams& params)
      : info_(info), prompts_(prompts), params_(params) {
    if (prompts_.empty()) fail("generate: no prompt");
    next();  // validates the parameters (every row resolves the same settings)
  }
  bool done() const override { return done_; }
  const ForwardPlan& plan() override {
    if (done_) fail("DenoiseLoop::plan: generation is over");
    if (d_->done()) next();  // the previous prompt's loop lived on for its last event()
    return d_->plan();
  }
  void step(std::span<const float> logits) override {
    if (done_) fail("DenoiseLoop::step: generation is over");
    if (d_->done()) next();
    d_->step(logits);
    after_step();
  }
  bool takes_stats() override {
    if (done_) return false;
    if (d_->done()) next();
    return d_->takes_stats();
  }
  void step(std::span<const LogitStats> stats) override {
    if (done_) fail("DenoiseLoop::step: generation is over");
    if (d_->done()) next();
    d_->step(stats);
    after_step();
  }
  void cancel() override {
    if (done_) return;
    if (!d_->done()) {
      d_->cancel();
      finish_row();
    }
    all_.cancelled = true;
    done_ = true;
  }
  const StepEvent& event() const override { return event_; }
  GenerateResult result() const override { return all_; }
  int64_t rows() const override { return static_cast<int64_t>(prompts_.size()); }
  int64_t batch_rows() const override { return 1; }
  bool block_loop() const override { return true; }

 private:
  void after_step() {
    event_ = d_->event();
    const BlockSettings& s = d_->settings();
    const int64_t size = event_.canvas ? static_cast<int64_t>((*event_.canvas)[0].size()) : 0;
    int64_t frozen = size;  // LLaDA2.0 / SDAR never change a committed token; nothing changes once done
    if (!d_->done() && s.loop == BlockLoop::kLlada21) {
      const int64_t prompt = static_cast<int64_t>(prompts_[row_].size());
      frozen = std::clamp<int64_t>(event_.block * s.block_length - prompt, 0, size);
    }
    // The canvas is whole blocks: what lies past gen_length is never part of the output.
    final_.assign(1, std::min(frozen, s.gen_length));
    event_.final_prefix = &final_;
    if (d_->done()) finish_row();
  }
  void next() {
    d_ = std::make_unique<BlockDenoiser>(info_, prompts_[row_], params_, static_cast<int64_t>(row_));
    if (d_->done()) fail("generate: nothing to denoise");  // cannot happen: gen_length > 0
  }
  void finish_row() {
    GenerateResult r = d_->result();
    all_.outputs.push_back(std::move(r.outputs[0]));
    all_.canvases.push_back(std::move(r.canvases[0]));
    all_.forwards += r.forwards;
    all_.forward_tokens += r.forward_tokens;
    all_.cancelled = all_.cancelled || r.cancelled;
    // The next prompt's loop starts at the next plan() / step(): event() still points into this one.
    if (r.cancelled || ++row_ == prompts_.size()) done_ = true;
  }

  ModelInfo info_;
  std::vector<std::vector<int32_t>> prompts_;
  GenerateParams params_;
  size_t row_ = 0;
  std::unique_ptr<BlockDenoiser> d_;
  bool done_ = false;
  GenerateResult all_;
  StepEvent event_;
  std::vector<int64_t> final_;
};

}  // namespace

std::unique_ptr<DenoiseLoop> make_denoise_loop(const ModelInfo& info,
                                               const std::vector<std::vector<int32_t>>& prompts,
                                               const GenerateParams& params, bool infill) {
  if (info.block_size > 0) {
    if (infill)
      fail("infill: ", info.architecture,
           " is a block-diffusion family; infilling is not offered (its attention is block-causal: a block "
           "never "
           "sees the text after it, so a suffix could not shape the span; generate continues a prefix)");
    return std::make_unique<BlockLoops>(info, prompts, params);
  }
  return std::make_unique<BidirectionalLoop>(info, prompts, params, infill);
}

}  // namespace dllm
