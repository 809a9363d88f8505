// A model whose logits are scripted instead of computed, for tests that need the denoiser to meet a given
// token (EOS) at a given place: generated position g (0 = the first after the prompt) predicts token
// script(g) with a logit that falls with g, so that confidence-ordered unmasking commits left to right, one
// position per step. The info (vocabulary, mask / EOS ids, Dream's logit shift) is a real model's, so its
// family's rules apply.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "dllm/dllm.h"

namespace dllm::test {

class ScriptedModel : public Model {
 public:
  ScriptedModel(ModelInfo info, int64_t prompt_len, std::function<int32_t(int64_t)> script)
      : info_(std::move(info)), prompt_len_(prompt_len), script_(std::move(script)) {}

  const ModelInfo& info() const override { return info_; }

  Expected<std::vector<float>> forward(const ForwardInput& in) override {
    if (in.cache_op != CacheOp::kNone)
      return Expected<std::vector<float>>::failure("ScriptedModel: no caches");
    const int64_t seq = static_cast<int64_t>(in.tokens.size()) / in.batch,
                  rows = logits_end(in) - in.logits_from;
    const int64_t V = info_.vocab_size;
    std::vector<float> logits(static_cast<size_t>(in.batch * rows * V), 0.0f);
    for (int64_t b = 0; b < in.batch; ++b)
      for (int64_t r = 0; r < rows; ++r) {
        // The position this row predicts: its own, or (Dream) the next one.
        const int64_t g = in.logits_from + r + (info_.shift_logits ? 1 : 0) - prompt_len_;
        if (g < 0 || g >= seq - prompt_len_) continue;
        logits[static_cast<size_t>((b * rows + r) * V + script_(g))] = 8.0f - 0.1f * static_cast<float>(g);
      }
    ++forwards_;
    return logits;
  }

  int64_t forwards() const { return forwards_; }

  // A token id that is none of the special ones (mask, EOS, EOT, BOS, pad).
  static int32_t plain_token(const ModelInfo& i) {
    int32_t t = 1;
    while (t == i.mask_id || t == i.eos_id || t == i.eot_id || t == i.bos_id || t == i.pad_id) ++t;
    return t;
  }

 private:
  ModelInfo info_;
  int64_t prompt_len_;
  std::function<int32_t(int64_t)> script_;
  int64_t forwards_ = 0;
};

}  // namespace dllm::test
