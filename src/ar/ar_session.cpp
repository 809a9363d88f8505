#include "ar/ar_session.h"

#include "core/error.h"

namespace dllm {

ArSession::ArSession(Model& model) : model_(model) {
  if (!model.info().autoregressive)
    fail(model.info().path, ": ", model.info().architecture,
         " is a diffusion model; autoregressive decoding needs a causal model (qwen2, qwen3, llama)");
}

std::vector<float> ArSession::advance(std::span<const int32_t> tokens, int64_t logits_for) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) fail("autoregressive decoding: no tokens to run");
  if (logits_for < 1 || logits_for > n)
    fail("autoregressive decoding: logits for ", logits_for, " of ", n, " tokens");
  const int64_t limit = model_.info().max_seq_len;
  if (length() + n > limit)
    fail("the sequence would reach ", length() + n, " tokens, past the model's context of ", limit,
         " (max_position_embeddings / context_length)");
  ForwardInput in;
  in.tokens = tokens;
  in.logits_from = n - logits_for;
  in.cache = &cache_;
  in.cache_op = CacheOp::kExtend;
  in.cache_append = n;
  in.attention_block = 1;  // block-causal with blocks of one token: causal
  auto logits = model_.forward(in).value();
  ++forwards_;
  forward_tokens_ += n;
  return logits;
}

void ArSession::truncate(int64_t length) {
  if (length < 0 || length > cache_.seq_len)
    fail("autoregressive decoding: cannot truncate ", cache_.seq_len, " cached tokens to ", length);
  cache_.truncate(length);
}

}  // namespace dllm
