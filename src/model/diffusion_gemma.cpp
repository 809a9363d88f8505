// DiffusionGemma's encoder and decoder on the CPU (model/diffusion_gemma.h). M:line references are to the
// reference's modeling_diffusion_gemma.py (tests/data/dgemma/README.md §6).
#include "model/diffusion_gemma.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "kernels/parallel.h"
#include "kernels/table_product.h"
#include "model/precision.h"

namespace dllm {

// Each row's keys and values per layer, as roped and normed by the encoder: [layer * batch + row] ->
// [length][kv_heads * head_dim]. Sliding layers keep all of them too; attention reads the last W - 1.
class DiffusionGemma::Cache final : public EncoderCache {
 public:
  Cache(int64_t batch, int64_t layers)
      : batch_(batch), keys(static_cast<size_t>(batch * layers)), values(keys.size()) {}
  int64_t batch() const override { return batch_; }
  int64_t length() const override { return length_; }

  int64_t batch_ = 0, length_ = 0;
  std::vector<std::vector<float>> keys, values;
};

namespace {

void check_tokens(std::span<const int32_t> tokens, int64_t vocab, const char* what) {
  for (int32_t t : tokens)
    if (t < 0 || t >= vocab) fail(what, ": token id ", t, " is outside the vocabulary (", vocab, ")");
}

// y = x · wᵀ over `rows` rows into a vector sized for it.
void project(const MatMul& w, const std::vector<float>& x, int64_t rows, std::vector<float>& y) {
  y.resize(static_cast<size_t>(rows * w.out_features()));
  w.forward(x.data(), rows, y.data());
}

void norm(const std::vector<float>& x, const std::vector<float>& w, int64_t rows, float eps,
          std::vector<float>& out) {
  out.resize(x.size());
  rms_norm(x.data(), w.data(), rows, static_cast<int64_t>(w.size()), eps, out.data());
}

// down(gelu_tanh(gate(x)) * up(x)) over rows of x.
void gelu_mlp(const MatMul& gate, const MatMul& up, const MatMul& down, const std::vector<float>& x,
              int64_t rows, std::vector<float>& out) {
  std::vector<float> g, u;
  project(gate, x, rows, g);
  project(up, x, rows, u);
  gelu_tanh_mul(g.data(), u.data(), static_cast<int64_t>(g.size()), g.data());
  project(down, g, rows, out);
}

// One query row's attention over keys [n_keys, kv_dim] (GQA head kv_head), scores unscaled (M:293, 395),
// softmax in f32; `visible(j)` says which keys count.
template <class Visible>
void attend(const float* q, const float* keys, const float* values, int64_t n_keys, int64_t kv_dim,
            int64_t kv_head, int64_t head_dim, Visible&& visible, float* scores, float* out) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n_keys; ++j) {
    if (!visible(j)) {
      scores[j] = -std::numeric_limits<float>::infinity();
      continue;
    }
    const float* k = keys + j * kv_dim + kv_head * head_dim;
    float s = 0;
    for (int64_t t = 0; t < head_dim; ++t) s += q[t] * k[t];
    scores[j] = s;
    max = std::max(max, s);
  }
  float sum = 0;
  for (int64_t j = 0; j < n_keys; ++j) {
    scores[j] = std::isinf(scores[j]) ? 0.0f : std::exp(scores[j] - max);
    sum += scores[j];
  }
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t j = 0; j < n_keys; ++j) {
    if (scores[j] == 0) continue;
    const float p = scores[j] / sum;
    const float* v = values + j * kv_dim + kv_head * head_dim;
    for (int64_t t = 0; t < head_dim; ++t) out[t] += p * v[t];
  }
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

size_t DiffusionGemma::weight_bytes() const {
  size_t bytes = weights_.embedding_blocks
                     ? weights_.embedding_blocks->weight_bytes()
                     : static_cast<size_t>(config_.info.vocab_size * config_.info.d_model) *
                           dtype_size(weights_.embedding_dtype);
  for (const MatMul* m : {&weights_.sc_gate, &weights_.sc_up, &weights_.sc_down}) bytes += m->weight_bytes();
  for (const auto& l : weights_.layers) {
    for (const MatMul* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down, &l.router})
      if (m->out_features() > 0) bytes += m->weight_bytes();
    for (int64_t e = 0; e < static_cast<int64_t>(l.experts.gate.size()); ++e) {
      // As they run: an expert not packed yet counts its blocks (the same bytes, another layout).
      const MoeWeights& x = l.experts;
      const bool packed = x.packed_on_use && x.packed_on_use[static_cast<size_t>(e)].packed;
      const auto& p = x.packed_on_use;
      const auto i = static_cast<size_t>(e);
      bytes += packed ? p[i].gate.weight_bytes() + p[i].up.weight_bytes() + p[i].down.weight_bytes()
                      : x.gate[i].weight_bytes() + x.up[i].weight_bytes() + x.down[i].weight_bytes();
    }
  }
  return bytes;
}

DiffusionGemma::DiffusionGemma(DiffusionGemmaConfig config, std::shared_ptr<const void> storage,
                               DiffusionGemmaWeights weights, ComputeType compute)
    : config_(std::move(config)),
      storage_(std::move(storage)),
      weights_(std::move(weights)),
      compute_(compute) {
  // R:229-266: "proportional" RoPE rotates the first int(factor * hd // 2) frequencies of the full hd; the
  // others are 0 (an infinite divisor here), so their dims pass unchanged.
  auto table = [&](const DiffusionGemmaConfig::Attention& a) {
    std::vector<float> factors;
    if (a.partial_rotary_factor < 1) {
      const auto rotating = static_cast<int64_t>(std::floor(a.partial_rotary_factor * a.head_dim / 2));
      factors.assign(static_cast<size_t>(a.head_dim / 2), std::numeric_limits<float>::infinity());
      std::fill(factors.begin(), factors.begin() + rotating, 1.0f);
    }
    return RopeTable(a.head_dim, a.rope_theta, 256, std::move(factors));
  };
  rope_sliding_ = table(config_.sliding);
  rope_full_ = table(config_.full);
  // M:758: sqrt(d) cast to the weights' dtype (bf16 runs scale by the bf16-rounded value).
  embed_scale_ = std::sqrt(static_cast<float>(config_.info.d_model));
  if (compute_ == ComputeType::kBF16) {
    uint32_t bits;
    std::memcpy(&bits, &embed_scale_, 4);
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u;
    std::memcpy(&embed_scale_, &bits, 4);
  }
  ones_.assign(
      static_cast<size_t>(std::max({config_.info.d_model, config_.full.head_dim, config_.sliding.head_dim})),
      1.0f);
}

Expected<std::vector<float>> DiffusionGemma::forward(const ForwardInput&) {
  return Expected<std::vector<float>>::failure(
      "diffusion_gemma has no single forward over tokens: it runs an encoder over the prompt and a decoder "
      "over a canvas (Model::canvas_decoder(); `dllm generate` drives them)");
}

std::unique_ptr<EncoderCache> DiffusionGemma::new_cache(int64_t batch) const {
  if (batch <= 0) fail("diffusion_gemma: a cache needs batch >= 1, got ", batch);
  return std::make_unique<Cache>(batch, config_.info.n_layers);
}

void DiffusionGemma::embed(std::span<const int32_t> tokens, std::vector<float>& x) const {
  const int64_t d = config_.info.d_model;
  const DType dt = weights_.embedding_dtype;
  x.resize(tokens.size() * static_cast<size_t>(d));
  for (size_t i = 0; i < tokens.size(); ++i) {
    float* row = x.data() + i * static_cast<size_t>(d);
    if (weights_.embedding_blocks)
      weights_.embedding_blocks->dequantize_row(tokens[i], row);
    else
      convert_to_f32(dt, weights_.embedding + static_cast<size_t>(tokens[i]) * d * dtype_size(dt), row,
                     static_cast<size_t>(d));
    for (int64_t j = 0; j < d; ++j) row[j] *= embed_scale_;
  }
}

void DiffusionGemma::attention(Stack stack, int64_t layer, const std::vector<float>& normed, int64_t batch,
                               int64_t n, Cache& cache, std::vector<float>& out) {
  const DiffusionGemmaLayer& w = weights_.layers[static_cast<size_t>(layer)];
  const int64_t rows = batch * n, heads = config_.info.n_heads, hd = w.head_dim, kvh = w.kv_heads;
  const int64_t kv_dim = kvh * hd, group = heads / kvh, start = cache.length_;
  const float eps = config_.rms_eps;
  std::vector<float> q, k, v;
  project(w.q, normed, rows, q);
  project(w.k, normed, rows, k);
  // M:335, 437: full layers take V from the raw k_proj output (before k_norm and RoPE).
  if (w.sliding)
    project(w.v, normed, rows, v);
  else
    v = k;
  rms_norm(q.data(), w.q_norm.data(), rows * heads, hd, eps, q.data());
  rms_norm(k.data(), w.k_norm.data(), rows * kvh, hd, eps, k.data());
  rms_norm(v.data(), ones_.data(), rows * kvh, hd, eps, v.data());
  std::vector<int64_t> positions(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) positions[static_cast<size_t>(r)] = start + r % n;
  const RopeTable& rope = w.sliding ? rope_sliding_ : rope_full_;
  rope_neox(q.data(), rows, heads, positions.data(), rope);
  rope_neox(k.data(), rows, kvh, positions.data(), rope);

  // Keys per row: the cached ones a sliding layer still sees (the last W - 1; full layers: all), then this
  // call's. The encoder is causal with the window q - W < k <= q (MU:92-101); the decoder's canvas sees all
  // of them (M:1376-1380: no mask).
  const int64_t window = config_.sliding_window;
  const int64_t first_cached = w.sliding ? std::max<int64_t>(0, start - (window - 1)) : 0;
  const int64_t n_cached = start - first_cached, n_keys = n_cached + n;
  out.assign(static_cast<size_t>(rows * heads * hd), 0.0f);
  const double attention_start = profiling_ ? now_seconds() : 0;
  for (int64_t b = 0; b < batch; ++b) {
    const size_t slot = static_cast<size_t>(layer * batch + b);
    std::vector<float> keys(static_cast<size_t>(n_keys * kv_dim)), values(keys.size());
    std::copy_n(cache.keys[slot].data() + first_cached * kv_dim, n_cached * kv_dim, keys.begin());
    std::copy_n(cache.values[slot].data() + first_cached * kv_dim, n_cached * kv_dim, values.begin());
    std::copy_n(k.data() + b * n * kv_dim, n * kv_dim, keys.begin() + n_cached * kv_dim);
    std::copy_n(v.data() + b * n * kv_dim, n * kv_dim, values.begin() + n_cached * kv_dim);
    // The decoder (no mask) and the encoder's full layers (causal: the block rule with blocks of 1) run on
    // the attention kernel's sgemms, unscaled; the encoder's sliding window is a rule the kernel does not
    // have.
    if (stack == kDecoder || !w.sliding) {
      dllm::attention(q.data() + b * n * heads * hd, keys.data(), values.data(), 1, n, n_keys, heads, kvh, hd,
                      nullptr, out.data() + b * n * heads * hd, stack == kDecoder ? 0 : 1, n_cached, 1.0f);
    } else {
#pragma omp parallel
      {
        std::vector<float> scores(static_cast<size_t>(n_keys));
#pragma omp for collapse(2) schedule(static)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t h = 0; h < heads; ++h) {
            const int64_t qpos = start + i;
            auto visible = [&](int64_t j) {
              const int64_t kpos = first_cached + j;
              return kpos <= qpos && kpos > qpos - window;
            };
            attend(q.data() + ((b * n + i) * heads + h) * hd, keys.data(), values.data(), n_keys, kv_dim,
                   h / group, hd, visible, scores.data(), out.data() + ((b * n + i) * heads + h) * hd);
          }
      }
    }
    if (stack == kEncoder) {
      cache.keys[slot].insert(cache.keys[slot].end(), k.begin() + b * n * kv_dim,
                              k.begin() + (b + 1) * n * kv_dim);
      cache.values[slot].insert(cache.values[slot].end(), v.begin() + b * n * kv_dim,
                                v.begin() + (b + 1) * n * kv_dim);
    }
  }
  if (profiling_) profile_.attention_seconds += now_seconds() - attention_start;
}

void DiffusionGemma::mixture_of_experts(const DiffusionGemmaLayer& w, const std::vector<float>& h,
                                        int64_t rows, std::vector<float>& out) {
  const int64_t d = config_.info.d_model, experts = config_.info.n_experts, top = config_.info.n_experts_used;
  const float eps = config_.rms_eps;
  // M:529-550: the router sees the un-normed residual: proj(rmsnorm(h) * scale * d^-0.5), softmax, top-k,
  // renormalised, times per_expert_scale.
  std::vector<float> routed(h.size());
  rms_norm(h.data(), ones_.data(), rows, d, eps, routed.data());
  const float root = std::pow(static_cast<float>(d), -0.5f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < d; ++j) {
      float& x = routed[static_cast<size_t>(r * d + j)];
      x = x * w.router_scale[static_cast<size_t>(j)] * root;
    }
  std::vector<float> scores;
  project(w.router, routed, rows, scores);
  std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(experts));
  std::vector<std::vector<float>> weights_of(static_cast<size_t>(experts));
  std::vector<int64_t> order(static_cast<size_t>(experts));
  for (int64_t r = 0; r < rows; ++r) {
    float* s = scores.data() + r * experts;
    const float max = *std::max_element(s, s + experts);
    float sum = 0;
    for (int64_t e = 0; e < experts; ++e) sum += (s[e] = std::exp(s[e] - max));
    for (int64_t e = 0; e < experts; ++e) s[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return s[a] > s[b]; });
    float chosen = 0;
    for (int64_t t = 0; t < top; ++t) chosen += s[order[static_cast<size_t>(t)]];
    for (int64_t t = 0; t < top; ++t) {
      const int64_t e = order[static_cast<size_t>(t)];
      rows_of[static_cast<size_t>(e)].push_back(r);
      weights_of[static_cast<size_t>(e)].push_back(s[e] / chosen *
                                                   w.per_expert_scale[static_cast<size_t>(e)]);
    }
  }
  // M:566-590: experts in index order, each one's rows gathered, (gelu(gate) * up) · down, weighted and
  // added.
  std::vector<float> xe;
  norm(h, w.pre_ffn_norm_2, rows, eps, xe);
  out.assign(h.size(), 0.0f);
  std::vector<float> gathered, y;
  const double start = profiling_ ? now_seconds() : 0;
  for (int64_t e = 0; e < experts; ++e) {
    const auto& idx = rows_of[static_cast<size_t>(e)];
    if (idx.empty()) continue;
    const auto m = static_cast<int64_t>(idx.size());
    gathered.resize(static_cast<size_t>(m * d));
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(xe.data() + idx[static_cast<size_t>(i)] * d, d, gathered.data() + i * d);
    const ExpertMatrices mats = expert_matrices_packing_on_use(w.experts, e);
    gelu_mlp(mats.gate, mats.up, mats.down, gathered, m, y);
    for (int64_t i = 0; i < m; ++i) {
      const float wt = weights_of[static_cast<size_t>(e)][static_cast<size_t>(i)];
      float* o = out.data() + idx[static_cast<size_t>(i)] * d;
      for (int64_t j = 0; j < d; ++j) o[j] += y[static_cast<size_t>(i * d + j)] * wt;
    }
    if (profiling_) {
      profile_.experts_run += 1;
      profile_.expert_bytes +=
          static_cast<double>(mats.gate.weight_bytes() + mats.up.weight_bytes() + mats.down.weight_bytes());
      profile_.expert_flops += 2.0 * static_cast<double>(m) * 3 * config_.expert_ffn * d;
    }
  }
  if (profiling_) profile_.expert_seconds += now_seconds() - start;
}

void DiffusionGemma::run_layers(Stack stack, std::vector<float>& x, int64_t batch, int64_t n, Cache& cache) {
  const int64_t rows = batch * n;
  const float eps = config_.rms_eps;
  std::vector<float> a, att, o, h, t, mlp, moe;
  for (int64_t l = 0; l < config_.info.n_layers; ++l) {
    const DiffusionGemmaLayer& w = weights_.layers[static_cast<size_t>(l)];
    // M:700-744 (decoder), 622-666 (encoder).
    norm(x, w.input_norm, rows, eps, a);
    attention(stack, l, a, batch, n, cache, att);
    project(w.o, att, rows, o);
    norm(o, w.post_attn_norm, rows, eps, o);
    h = x;
    for (size_t i = 0; i < h.size(); ++i) h[i] += o[i];
    norm(h, w.pre_ffn_norm, rows, eps, t);
    gelu_mlp(w.gate, w.up, w.down, t, rows, mlp);
    norm(mlp, w.post_ffn_norm_1, rows, eps, mlp);
    mixture_of_experts(w, h, rows, moe);
    norm(moe, w.post_ffn_norm_2, rows, eps, moe);
    for (size_t i = 0; i < mlp.size(); ++i) mlp[i] += moe[i];
    norm(mlp, w.post_ffn_norm, rows, eps, mlp);
    const float scalar = w.scalar[stack];
    for (size_t i = 0; i < x.size(); ++i) x[i] = (h[i] + mlp[i]) * scalar;
  }
}

Expected<std::vector<float>> DiffusionGemma::encode(EncoderCache& cache_base, std::span<const int32_t> tokens,
                                                    bool hidden) {
  return capture([&] {
    auto* cache = dynamic_cast<Cache*>(&cache_base);
    if (!cache) fail("diffusion_gemma: encode() needs a cache made by this model's new_cache()");
    const int64_t batch = cache->batch_;
    if (tokens.empty() || static_cast<int64_t>(tokens.size()) % batch)
      fail("diffusion_gemma: encode() got ", tokens.size(), " tokens for a batch of ", batch);
    check_tokens(tokens, config_.info.vocab_size, "diffusion_gemma encoder input");
    const int64_t n = static_cast<int64_t>(tokens.size()) / batch;
    std::lock_guard<std::mutex> lock(mutex_);
    rope_sliding_.ensure(cache->length_ + n);
    rope_full_.ensure(cache->length_ + n);
    std::vector<float> x;
    embed(tokens, x);
    run_layers(kEncoder, x, batch, n, *cache);
    cache->length_ += n;
    if (!hidden) return std::vector<float>();
    norm(x, weights_.final_norm, batch * n, config_.rms_eps, x);
    return x;
  });
}

Expected<std::vector<float>> DiffusionGemma::decode(const EncoderCache& cache_base,
                                                    std::span<const int32_t> canvas,
                                                    std::span<const float> self_conditioning) {
  return capture([&] {
    const auto* cache = dynamic_cast<const Cache*>(&cache_base);
    if (!cache) fail("diffusion_gemma: decode() needs a cache made by this model's new_cache()");
    const int64_t batch = cache->batch_, d = config_.info.d_model, vocab = config_.info.vocab_size;
    if (canvas.empty() || static_cast<int64_t>(canvas.size()) % batch)
      fail("diffusion_gemma: decode() got ", canvas.size(), " canvas tokens for a batch of ", batch);
    check_tokens(canvas, vocab, "diffusion_gemma canvas");
    const int64_t n = static_cast<int64_t>(canvas.size()) / batch, rows = batch * n;
    if (!self_conditioning.empty() && static_cast<int64_t>(self_conditioning.size()) != rows * vocab)
      fail("diffusion_gemma: self-conditioning logits hold ", self_conditioning.size(), " values for ", rows,
           " canvas positions x ", vocab);
    std::lock_guard<std::mutex> lock(mutex_);
    rope_sliding_.ensure(cache->length_ + n);
    rope_full_.ensure(cache->length_ + n);

    // M:1269-1280, 811-823: rmsnorm(E[canvas] * sqrt(d) + mlp(pre_norm(softmax(sc) · E * sqrt(d)))); with no
    // self-conditioning the soft embedding is zeros, and so is the MLP's output.
    std::vector<float> x;
    embed(canvas, x);
    const double sc_start = profiling_ ? now_seconds() : 0;
    if (!self_conditioning.empty()) {
      std::vector<float> probs(self_conditioning.begin(), self_conditioning.end()), soft(x.size()), sc;
      parallel_for_if(rows * vocab > 65536, rows, [&](int64_t r) {
        float* p = probs.data() + r * vocab;
        const float max = *std::max_element(p, p + vocab);
        float sum = 0;
        for (int64_t v = 0; v < vocab; ++v) sum += (p[v] = std::exp(p[v] - max));
        for (int64_t v = 0; v < vocab; ++v) p[v] /= sum;
      });
      if (weights_.embedding_blocks)
        rows_times_rows(
            probs.data(), rows, vocab,
            [&](int64_t v, float* out) { weights_.embedding_blocks->dequantize_row(v, out); }, d,
            soft.data());
      else
        rows_times_table(probs.data(), rows, vocab, weights_.embedding, weights_.embedding_dtype, d,
                         soft.data());
      for (float& s : soft) s *= embed_scale_;
      norm(soft, weights_.sc_pre_norm, rows, config_.rms_eps, soft);
      gelu_mlp(weights_.sc_gate, weights_.sc_up, weights_.sc_down, soft, rows, sc);
      for (size_t i = 0; i < x.size(); ++i) x[i] += sc[i];
    }
    rms_norm(x.data(), ones_.data(), rows, d, config_.rms_eps, x.data());
    if (profiling_) profile_.self_conditioning_seconds += now_seconds() - sc_start;
    // The decoder reads the cache and writes nothing to it (M:471-481).
    run_layers(kDecoder, x, batch, n, const_cast<Cache&>(*cache));
    norm(x, weights_.final_norm, rows, config_.rms_eps, x);
    const double head_start = profiling_ ? now_seconds() : 0;
    std::vector<float> logits(static_cast<size_t>(rows * vocab));
    weights_.head.forward(x.data(), rows, logits.data());
    const float cap = config_.softcap;  // M:1666-1670
    parallel_for_if(rows * vocab > 65536, rows, [&](int64_t r) {
      float* row = logits.data() + r * vocab;
      for (int64_t v = 0; v < vocab; ++v) row[v] = std::tanh(row[v] / cap) * cap;
    });
    if (profiling_) profile_.head_seconds += now_seconds() - head_start;
    return logits;
  });
}

}  // namespace dllm
