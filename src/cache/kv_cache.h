// Keys and values of every layer for the rows of one sequence batch: what Fast-dLLM's prefix and dual caches
// keep between denoising steps. Filled by a forward with CacheOp::kStore, read (and partly overwritten) by
// kReuse. Keys are stored after RoPE, so a reused key needs no position bookkeeping.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dllm/dllm.h"

namespace dllm {

class KvCache {
 public:
  bool empty() const { return seq_len == 0; }
  void clear() {
    batch = seq_len = kv_dim = 0;
    device.reset();
    k.clear();
    v.clear();
    valid.clear();
  }
  void reset(int64_t layers, int64_t rows, int64_t len, int64_t dim) {
    batch = rows;
    seq_len = len;
    kv_dim = dim;
    k.assign(static_cast<size_t>(layers), std::vector<float>(static_cast<size_t>(rows * len * dim)));
    v.assign(static_cast<size_t>(layers), std::vector<float>(static_cast<size_t>(rows * len * dim)));
    valid.assign(static_cast<size_t>(rows * len), 1);
    device.reset();
  }
  // Keeps the first `length` positions (batch 1): the rest of k / v (or of the device's copy) is forgotten.
  void truncate(int64_t length) {
    if (!device)
      for (auto* layers : {&k, &v})
        for (auto& t : *layers) t.resize(static_cast<size_t>(length * kv_dim));
    seq_len = length;
    valid.assign(static_cast<size_t>(length), 1);
  }
  size_t bytes() const {
    size_t n = valid.size();
    for (const auto& t : k) n += t.size() * sizeof(float);
    for (const auto& t : v) n += t.size() * sizeof(float);
    return n;
  }

  int64_t batch = 0, seq_len = 0, kv_dim = 0;
  std::vector<std::vector<float>> k, v;  // [layer][batch * seq_len * kv_dim]
  std::vector<uint8_t> valid;            // [batch * seq_len], 0 = padding
  // Set where a device backend holds the keys and values instead (k and v then stay empty): its own record of
  // them (src/backend/vulkan). The numbers above stay the host's.
  std::shared_ptr<void> device;
};

}  // namespace dllm
