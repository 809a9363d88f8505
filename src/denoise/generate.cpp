// dllm::generate / dllm::infill: thin drivers over a Denoiser (one request, forwards run here one after
// another), or, for block-diffusion families (ModelInfo::block_size > 0), over one BlockDenoiser per prompt.
#include <chrono>

#include "core/error.h"
#include "denoise/block_denoiser.h"
#include "denoise/denoiser.h"

namespace dllm {

namespace {

Expected<GenerateResult> drive(Model& model, const std::vector<std::vector<int32_t>>& rows,
                               const GenerateParams& params, const StepCallback& on_step, bool infill) {
  return capture([&] {
    const auto start = std::chrono::steady_clock::now();
    if (model.info().block_size > 0) {
      if (infill)
        fail("infill: ", model.info().architecture, " is a block-diffusion family; infilling is not offered");
      // The official block loops are batch-1: the prompts run one after another, each on its own grid.
      GenerateResult all;
      for (size_t row = 0; row < rows.size() && !all.cancelled; ++row) {
        BlockDenoiser d(model.info(), rows[row], params, static_cast<int64_t>(row));
        while (!d.done()) {
          std::vector<float> logits = model.forward(d.plan().input()).value();
          d.step(logits);
          if (on_step && !on_step(d.event())) d.cancel();
        }
        GenerateResult r = d.result();
        all.outputs.push_back(std::move(r.outputs[0]));
        all.canvases.push_back(std::move(r.canvases[0]));
        all.forwards += r.forwards;
        all.forward_tokens += r.forward_tokens;
        all.cancelled = r.cancelled;
      }
      all.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return all;
    }
    Denoiser d(model.info(), rows, params, infill);
    while (!d.done()) {
      std::vector<float> logits = model.forward(d.plan().input()).value();
      d.step(logits);
      if (on_step && !on_step(d.event())) d.cancel();
    }
    GenerateResult r = d.result();
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
