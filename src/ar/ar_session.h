// One sequence of an autoregressive model and its KV cache: the prompt runs in one causal forward (prefill),
// then each call runs only the new tokens against the cache. Speculative decoding feeds several drafted
// tokens at once, reads the logits of each, and rolls the cache back past the first rejected one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cache/kv_cache.h"
#include "dllm/dllm.h"

namespace dllm {

class ArSession {
 public:
  explicit ArSession(Model& model);

  // Runs `tokens` after the `length()` tokens held, appends their keys/values, and returns the logits of the
  // last `logits_for` of them ([logits_for, vocab]; row i predicts the token after tokens[n - logits_for +
  // i]).
  std::vector<float> advance(std::span<const int32_t> tokens, int64_t logits_for = 1);
  // Forgets everything after the first `length` tokens (rejected draft tokens).
  void truncate(int64_t length);
  int64_t length() const { return cache_.seq_len; }
  int64_t forwards() const { return forwards_; }
  int64_t forward_tokens() const { return forward_tokens_; }

 private:
  Model& model_;
  KvCache cache_;
  int64_t forwards_ = 0, forward_tokens_ = 0;
};

}  // namespace dllm
