// dllm::generate: the thin driver over a Denoiser (one request, forwards run here one after another).
#include <chrono>

#include "denoise/denoiser.h"

namespace dllm {

Expected<GenerateResult> generate(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                  const GenerateParams& params, const StepCallback& on_step) {
  return capture([&] {
    const auto start = std::chrono::steady_clock::now();
    Denoiser d(model.info(), prompts, params);
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

}  // namespace dllm
