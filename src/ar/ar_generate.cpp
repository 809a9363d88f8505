#include "ar/ar_generate.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "ar/ar_session.h"
#include "ar/token_sampler.h"
#include "core/error.h"
#include "core/rng.h"

namespace dllm {

void reject_diffusion_settings(const ModelInfo& info, const GenerateParams& p) {
  const std::string what = info.architecture + " is autoregressive: ";
  auto reject = [&](bool set, const char* name) {
    if (set) fail(what, name, " applies to diffusion models only");
  };
  reject(p.block_length != 0, "block_length (--block-length)");
  reject(p.steps != 0, "steps (--steps)");
  reject(p.cfg_scale != 0, "cfg_scale (--cfg-scale)");
  reject(p.unmask != Unmask::kDefault, "the unmasking order (--unmask / --remasking / --alg)");
  reject(p.transfer != Transfer::kDefault, "the transfer schedule (--schedule)");
  reject(p.sampler != Sampler::kDefault, "the denoising sampler (--sampler)");
  reject(p.cache != CacheMode::kDefault && p.cache != CacheMode::kNone, "a denoising cache (--cache)");
  reject(p.block_loop != BlockLoop::kDefault, "a block-diffusion loop (--block-loop)");
  reject(p.alg_temp != 0, "alg_temp (--alg-temp)");
  reject(p.logits_eos_inf || p.confidence_eos_eot_inf, "the EOS confidence rules");
  if (p.gen_length <= 0) fail("gen_length (--gen-length / max_tokens) must be > 0, got ", p.gen_length);
  if (p.temperature < 0) fail("temperature must be >= 0, got ", p.temperature);
  if (!(p.top_p > 0) || p.top_p > 1) fail("top_p must be in (0, 1], got ", p.top_p);
}

std::vector<int32_t> autoregressive_stop_ids(const ModelInfo& info, const GenerateParams& params) {
  if (params.stop_ids) return *params.stop_ids;
  std::vector<int32_t> ids = info.eog_ids;
  for (int32_t id : {info.eos_id, info.eot_id})
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return ids;
}

GenerateResult generate_autoregressive(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                       const GenerateParams& params, const StepCallback& on_step) {
  const ModelInfo& info = model.info();
  reject_diffusion_settings(info, params);
  if (prompts.empty()) fail("generate: no prompts");
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> stop = autoregressive_stop_ids(info, params);
  const TokenSampling sampling{params.temperature, params.top_k, params.top_p};
  GenerateResult result;
  for (size_t row = 0; row < prompts.size() && !result.cancelled; ++row) {
    const auto& prompt = prompts[row];
    if (prompt.empty())
      fail("generate: prompt ", row, " is empty (an autoregressive model needs a first token)");
    Rng rng(params.seed + row);
    ArSession session(model);
    std::vector<float> logits = session.advance(prompt);
    std::vector<std::vector<int32_t>> canvas(1);
    std::vector<std::vector<int64_t>> committed(1);
    std::vector<int64_t> final_prefix(1);
    std::vector<int32_t>& out = canvas[0];
    for (int64_t i = 0; i < params.gen_length; ++i) {
      const int32_t token = sample_token(logits, sampling, rng);
      out.push_back(token);
      const bool stopped = std::find(stop.begin(), stop.end(), token) != stop.end();
      if (on_step) {
        committed[0] = {i};
        final_prefix[0] = static_cast<int64_t>(out.size());
        StepEvent ev;
        ev.block = 0;
        ev.step = i;
        ev.forwards = result.forwards + session.forwards();
        ev.canvas = &canvas;
        ev.committed = &committed;
        ev.row = static_cast<int64_t>(row);
        ev.final_prefix = &final_prefix;
        if (!on_step(ev)) {
          result.cancelled = true;
          break;
        }
      }
      if (stopped || i + 1 == params.gen_length) break;
      logits = session.advance(std::span<const int32_t>(&token, 1));
    }
    result.outputs.push_back(out);
    result.forwards += session.forwards();
    result.forward_tokens += session.forward_tokens();
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace dllm
