// dllm::generate / dllm::infill: thin drivers over a DenoiseLoop (autoregressive models: ar/ar_generate.h;
// uniform-state canvas models: denoise/uniform_state.h) (denoise/denoise_loop.h: a Denoiser, or one
// BlockDenoiser per prompt for block-diffusion families), forwards run here one after another.
#include <chrono>

#include "ar/ar_generate.h"
#include "core/error.h"
#include "denoise/denoise_loop.h"
#include "denoise/uniform_state.h"

namespace dllm {

namespace {

Expected<GenerateResult> drive(Model& model, const std::vector<std::vector<int32_t>>& rows,
                               const GenerateParams& params, const StepCallback& on_step, bool infill) {
  return capture([&] {
    if (CanvasDecoder* decoder = model.canvas_decoder()) {
      if (infill)
        fail(model.info().architecture,
             " denoises uniform-state canvases after the prompt: infilling needs a masked diffusion model");
      return generate_uniform_state(model, *decoder, rows, params, on_step).value();
    }
    if (model.info().autoregressive) {
      if (infill)
        fail(model.info().architecture,
             " is autoregressive: infilling needs a diffusion model (it fills masks with context on both "
             "sides)");
      return generate_autoregressive(model, rows, params, on_step);
    }
    std::unique_ptr<DenoiseLoop> d = make_denoise_loop(model.info(), rows, params, infill);
    return run_denoise_loop(model, *d, on_step).value();
  });
}

}  // namespace

Expected<GenerateResult> run_denoise_loop(Model& model, DenoiseLoop& loop, const StepCallback& on_step) {
  return capture([&] {
    const auto start = std::chrono::steady_clock::now();
    while (!loop.done()) {
      const ForwardInput in = loop.plan().input();
      // On a device the logits stay there when the step needs only their per-row stats.
      if (model.reduces_on_device() && loop.takes_stats())
        loop.step(std::span<const LogitStats>(model.forward_stats(in).value()));
      else
        loop.step(std::span<const float>(model.forward(in).value()));
      if (on_step && !on_step(loop.event())) loop.cancel();
    }
    GenerateResult r = loop.result();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  });
}

Expected<GenerateResult> generate(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                  const GenerateParams& params, const StepCallback& on_step) {
  return drive(model, prompts, params, on_step, /*infill=*/false);
}

Expected<GenerateResult> infill(Model& model, const std::vector<std::vector<int32_t>>& canvases,
                                const GenerateParams& params, const StepCallback& on_step) {
  return drive(model, canvases, params, on_step, /*infill=*/true);
}

}  // namespace dllm
