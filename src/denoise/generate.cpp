// dllm::generate / dllm::infill: thin drivers over a DenoiseLoop (autoregressive models: ar/ar_generate.h)
// (denoise/denoise_loop.h: a Denoiser, or one BlockDenoiser per prompt for block-diffusion families),
// forwards run here one after another.
#include <chrono>

#include "ar/ar_generate.h"
#include "core/error.h"
#include "denoise/denoise_loop.h"

namespace dllm {

namespace {

Expected<GenerateResult> drive(Model& model, const std::vector<std::vector<int32_t>>& rows,
                               const GenerateParams& params, const StepCallback& on_step, bool infill) {
  return capture([&] {
    if (model.info().autoregressive) {
      if (infill)
        fail(model.info().architecture,
             " is autoregressive: infilling needs a diffusion model (it fills masks with context on both "
             "sides)");
      return generate_autoregressive(model, rows, params, on_step);
    }
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<DenoiseLoop> d = make_denoise_loop(model.info(), rows, params, infill);
    while (!d->done()) {
      std::vector<float> logits = model.forward(d->plan().input()).value();
      d->step(logits);
      if (on_step && !on_step(d->event())) d->cancel();
    }
    GenerateResult r = d->result();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  });
}

}  // namespace

Expected<GenerateResult> generate(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                  const GenerateParams& params, const StepCallback& on_step) {
  return drive(model, prompts, params, on_step, /*infill=*/false);
}

Expected<GenerateResult> infill(Model& model, const std::vector<std::vector<int32_t>>& canvases,
                                const GenerateParams& params, const StepCallback& on_step) {
  return drive(model, canvases, params, on_step, /*infill=*/true);
}

}  // namespace dllm
