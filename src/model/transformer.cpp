#include "model/transformer.h"

#include <algorithm>
#include <numeric>

#include "cache/kv_cache.h"
#include "core/error.h"

namespace dllm {

Transformer::Transformer(TransformerConfig config, std::unique_ptr<Checkpoint> checkpoint,
                         TransformerWeights weights)
    : config_(std::move(config)),
      checkpoint_(std::move(checkpoint)),
      weights_(std::move(weights)),
      rope_(config_.info.head_dim, config_.rope_theta, 512) {}

void Transformer::embed(std::span<const int32_t> tokens, float* out) const {
  const int64_t d = config_.info.d_model;
  if (weights_.embedding_q8) {
    for (size_t i = 0; i < tokens.size(); ++i) weights_.embedding_q8->dequantize_row(tokens[i], out + i * d);
    return;
  }
  const TensorView& e = *weights_.embedding;
  const size_t row_bytes = static_cast<size_t>(d) * dtype_size(e.dtype);
  for (size_t i = 0; i < tokens.size(); ++i)
    convert_to_f32(e.dtype, e.data + static_cast<size_t>(tokens[i]) * row_bytes, out + i * d, static_cast<size_t>(d));
}

namespace {
template <class F>
void for_each_matrix(const TransformerWeights& w, F&& f) {
  for (const auto& L : w.layers)
    for (const MatMul* m : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) f(*m);
  f(w.head);
}
}  // namespace

size_t Transformer::weight_bytes() const {
  size_t bytes = 0;
  for_each_matrix(weights_, [&](const MatMul& m) { bytes += m.weight_bytes(); });
  if (weights_.embedding_q8) {
    if (!(weights_.head.is_q8() && weights_.head.q8() == weights_.embedding_q8))
      bytes += weights_.embedding_q8->weight_bytes();
  } else if (weights_.embedding) {
    bytes += weights_.embedding->nbytes;
  }
  auto vec = [](const std::vector<float>& v) { return v.size() * sizeof(float); };
  for (const auto& L : weights_.layers)
    bytes += vec(L.attn_norm) + vec(L.ffn_norm) + vec(L.q_bias) + vec(L.k_bias) + vec(L.v_bias);
  return bytes + vec(weights_.final_norm);
}

int64_t Transformer::q8_matrices() const {
  int64_t n = 0;
  for_each_matrix(weights_, [&](const MatMul& m) { n += m.is_q8(); });
  return n;
}

int64_t Transformer::matrices() const { return static_cast<int64_t>(weights_.layers.size()) * 7 + 1; }

Expected<std::vector<float>> Transformer::forward(const ForwardInput& input) {
  return capture([&] { return run(input); });
}

std::vector<float> Transformer::run(const ForwardInput& input) {
  const ModelInfo& mi = config_.info;
  const int64_t batch = input.batch;
  if (batch <= 0 || input.tokens.empty() || input.tokens.size() % static_cast<size_t>(batch) != 0)
    fail("forward: ", input.tokens.size(), " tokens do not split into ", batch, " equal rows");
  const int64_t seq = static_cast<int64_t>(input.tokens.size()) / batch;
  if (input.logits_from < 0 || input.logits_from >= seq)
    fail("forward: logits_from ", input.logits_from, " outside [0, ", seq, ")");
  for (int32_t t : input.tokens)
    if (t < 0 || t >= mi.vocab_size) fail("forward: token id ", t, " is outside the vocabulary [0, ", mi.vocab_size, ")");
  if (!input.positions.empty() && input.positions.size() != input.tokens.size())
    fail("forward: ", input.positions.size(), " positions given for ", input.tokens.size(), " tokens");
  if (!input.valid.empty() && input.valid.size() != input.tokens.size())
    fail("forward: ", input.valid.size(), " validity flags given for ", input.tokens.size(), " tokens");
  for (int64_t p : input.positions)
    if (p < 0 || p >= mi.max_seq_len) fail("forward: position ", p, " outside [0, ", mi.max_seq_len, ")");
  const CacheOp op = input.cache ? input.cache_op : CacheOp::kNone;
  if (input.cache_op != CacheOp::kNone && !input.cache) fail("forward: a cache operation needs a cache");
  KvCache* cache = input.cache;
  const int64_t offset = op == CacheOp::kReuse ? input.cache_offset : 0;
  if (op == CacheOp::kReuse) {
    if (cache->empty() || cache->batch != batch)
      fail("forward: the cache holds ", cache->batch, " rows, not the ", batch, " of this call (store it first)");
    if (offset < 0 || offset + seq > cache->seq_len)
      fail("forward: tokens [", offset, ", ", offset + seq, ") are outside the cached ", cache->seq_len,
           " positions");
  }

  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t n = batch * seq, d = mi.d_model, hd = mi.head_dim;
  const int64_t q_dim = mi.n_heads * hd, kv_dim = mi.n_kv_heads * hd, ffn = mi.ffn_hidden;
  x_.resize(n * d);
  h_.resize(n * d);
  q_.resize(n * q_dim);
  k_.resize(n * kv_dim);
  v_.resize(n * kv_dim);
  att_.resize(n * q_dim);
  gate_.resize(n * ffn);
  up_.resize(n * ffn);

  std::vector<int64_t> positions(n);
  if (!input.positions.empty()) {
    std::copy(input.positions.begin(), input.positions.end(), positions.begin());
  } else {
    for (int64_t b = 0; b < batch; ++b)
      std::iota(positions.begin() + b * seq, positions.begin() + (b + 1) * seq, offset);
  }
  rope_.ensure(*std::max_element(positions.begin(), positions.end()) + 1);

  // Query validity (padding attends to nothing: its attention output is 0) and key validity.
  std::vector<uint8_t> query_valid;
  if (!input.valid.empty()) {
    query_valid.assign(input.valid.begin(), input.valid.end());
  } else if (op == CacheOp::kReuse) {
    for (int64_t b = 0; b < batch; ++b)
      query_valid.insert(query_valid.end(), cache->valid.begin() + b * cache->seq_len + offset,
                         cache->valid.begin() + b * cache->seq_len + offset + seq);
  }
  const bool any_invalid = std::find(query_valid.begin(), query_valid.end(), 0) != query_valid.end();
  if (op == CacheOp::kStore) {
    cache->reset(static_cast<int64_t>(weights_.layers.size()), batch, seq, kv_dim);
    if (!query_valid.empty()) cache->valid = query_valid;
  }
  const uint8_t* key_valid = nullptr;
  if (op == CacheOp::kReuse) {
    if (std::find(cache->valid.begin(), cache->valid.end(), 0) != cache->valid.end()) key_valid = cache->valid.data();
  } else if (any_invalid) {
    key_valid = query_valid.data();
  }

  auto record = [&](const float* src) {
    if (input.hidden_states) input.hidden_states->emplace_back(src, src + seq * d);  // row 0
  };
  if (input.hidden_states) input.hidden_states->clear();

  embed(input.tokens, x_.data());
  record(x_.data());
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    const LayerWeights& w = weights_.layers[l];
    rms_norm(x_.data(), w.attn_norm.data(), n, d, config_.rms_eps, h_.data());
    w.q.forward(h_.data(), n, q_.data());
    w.k.forward(h_.data(), n, k_.data());
    w.v.forward(h_.data(), n, v_.data());
    if (config_.qkv_bias) {
      add_bias(q_.data(), w.q_bias.data(), n, q_dim);
      add_bias(k_.data(), w.k_bias.data(), n, kv_dim);
      add_bias(v_.data(), w.v_bias.data(), n, kv_dim);
    }
    rope_neox(q_.data(), n, mi.n_heads, positions.data(), rope_);
    rope_neox(k_.data(), n, mi.n_kv_heads, positions.data(), rope_);
    if (op == CacheOp::kNone) {
      attention(q_.data(), k_.data(), v_.data(), batch, seq, seq, mi.n_heads, mi.n_kv_heads, hd, key_valid,
                att_.data());
    } else {
      // kStore writes every position; kReuse overwrites its range and attends over the whole cached rows.
      float* ck = cache->k[l].data();
      float* cv = cache->v[l].data();
      const int64_t len = cache->seq_len;
      for (int64_t b = 0; b < batch; ++b) {
        std::copy_n(k_.data() + b * seq * kv_dim, seq * kv_dim, ck + (b * len + offset) * kv_dim);
        std::copy_n(v_.data() + b * seq * kv_dim, seq * kv_dim, cv + (b * len + offset) * kv_dim);
      }
      attention(q_.data(), ck, cv, batch, seq, len, mi.n_heads, mi.n_kv_heads, hd, key_valid, att_.data());
    }
    if (any_invalid)
      for (int64_t r = 0; r < n; ++r)
        if (!query_valid[r]) std::fill_n(att_.data() + r * q_dim, q_dim, 0.0f);
    w.o.forward(att_.data(), n, x_.data(), /*accumulate=*/true);

    rms_norm(x_.data(), w.ffn_norm.data(), n, d, config_.rms_eps, h_.data());
    w.gate.forward(h_.data(), n, gate_.data());
    w.up.forward(h_.data(), n, up_.data());
    silu_mul(gate_.data(), up_.data(), n * ffn, gate_.data());
    w.down.forward(gate_.data(), n, x_.data(), /*accumulate=*/true);
    if (l + 1 < weights_.layers.size()) record(x_.data());
  }

  // Final norm and head only for the positions whose logits are wanted.
  const int64_t keep = seq - input.logits_from;
  std::vector<float> normed(batch * keep * d);
  for (int64_t b = 0; b < batch; ++b)
    rms_norm(x_.data() + (b * seq + input.logits_from) * d, weights_.final_norm.data(), keep, d, config_.rms_eps,
             normed.data() + b * keep * d);
  if (input.hidden_states) {
    std::vector<float> all(seq * d);
    rms_norm(x_.data(), weights_.final_norm.data(), seq, d, config_.rms_eps, all.data());
    record(all.data());
  }
  std::vector<float> logits(static_cast<size_t>(batch * keep * mi.vocab_size));
  weights_.head.forward(normed.data(), batch * keep, logits.data());
  return logits;
}

}  // namespace dllm
