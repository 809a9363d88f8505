// One interface for "a steppable denoising loop", whatever the family: Denoiser (LLaDA, Dream: a batch of
// rows denoised together) or the block-diffusion loops (LLaDA2.x, SDAR: one BlockDenoiser per prompt, run one
// after another as the official batch-1 loops are). dllm::generate's driver and the server's scheduler run
// every family through it:
//
//   std::unique_ptr<DenoiseLoop> d = make_denoise_loop(model.info(), prompts, params);  // validates params
//   while (!d->done()) {
//     d->step(model.forward(d->plan().input()).value());  // or forward_stats where d->takes_stats()
//     if (!callback(d->event())) d->cancel();
//   }
//   GenerateResult r = d->result();
//
// A plan with a cache (CacheOp != kNone) or block-causal attention (attention_block > 0) runs alone, one per
// forward (forward_plans refuses to batch it); the others may be batched across loops (denoise/denoiser.h).
// event() is the StepEvent of the last step: Denoiser's (every row), or the running BlockDenoiser's (one row;
// StepEvent::row names its prompt), with StepEvent::final_prefix filled in for every loop.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "denoise/denoiser.h"
#include "dllm/dllm.h"

namespace dllm {

class DenoiseLoop {
 public:
  virtual ~DenoiseLoop() = default;
  virtual bool done() const = 0;
  virtual const ForwardPlan& plan() = 0;
  virtual void step(std::span<const float> logits) = 0;
  // Whether the next step() may be given the plan's LogitStats (Model::forward_stats) instead of its logits,
  // and that step. run_denoise_loop does so on a model that reduces on a device (Model::reduces_on_device),
  // so that the logits never leave it.
  virtual bool takes_stats() = 0;
  virtual void step(std::span<const LogitStats> stats) = 0;
  virtual void cancel() = 0;
  virtual const StepEvent& event() const = 0;
  virtual GenerateResult result() const = 0;
  virtual int64_t rows() const = 0;        // prompts (outputs)
  virtual int64_t batch_rows() const = 0;  // canvas rows a forward of this loop runs at most (cfg: 2 per row)
  virtual bool block_loop() const = 0;     // a block-diffusion loop (LLaDA2.x, SDAR)
};

// Denoiser for bidirectional families; one BlockDenoiser per prompt (in order) for block-diffusion families
// (ModelInfo::block_size > 0, which take no infill). Throws dllm::Error naming the parameter at fault.
std::unique_ptr<DenoiseLoop> make_denoise_loop(const ModelInfo& info,
                                               const std::vector<std::vector<int32_t>>& prompts,
                                               const GenerateParams& params, bool infill = false);

// Runs `loop` to the end on `model`, one forward per step (dllm::generate's driver); seconds is the wall
// time.
Expected<GenerateResult> run_denoise_loop(Model& model, DenoiseLoop& loop, const StepCallback& on_step = {});

}  // namespace dllm
