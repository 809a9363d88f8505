#include "model/transformer.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "cache/kv_cache.h"
#include "core/error.h"
#include "core/spin_barrier.h"
#include "kernels/profile.h"

namespace dllm {

Transformer::Transformer(TransformerConfig config, std::unique_ptr<Checkpoint> checkpoint,
                         TransformerWeights weights)
    : config_(std::move(config)),
      checkpoint_(std::move(checkpoint)),
      weights_(std::move(weights)),
      rope_(config_.rotary_dim > 0 ? config_.rotary_dim : config_.info.head_dim, config_.rope_theta, 512,
            config_.rope_freq_factors) {}

void Transformer::embed(std::span<const int32_t> tokens, float* out) const {
  const int64_t d = config_.info.d_model;
  if (weights_.embedding_blocks) {
    for (size_t i = 0; i < tokens.size(); ++i)
      weights_.embedding_blocks->dequantize_row(tokens[i], out + i * d);
    return;
  }
  const TensorView& e = *weights_.embedding;
  const size_t row_bytes = static_cast<size_t>(d) * dtype_size(e.dtype);
  for (size_t i = 0; i < tokens.size(); ++i)
    convert_to_f32(e.dtype, e.data + static_cast<size_t>(tokens[i]) * row_bytes, out + i * d,
                   static_cast<size_t>(d));
}

namespace {
template <class F>
void for_each_matrix(const TransformerWeights& w, F&& f) {
  for (const auto& L : w.layers) {
    for (const MatMul* m : {&L.q, &L.k, &L.v, &L.o}) f(*m);
    if (!L.moe) {
      for (const MatMul* m : {&L.gate, &L.up, &L.down}) f(*m);
      continue;
    }
    const MoeWeights& e = *L.moe;
    f(e.router);
    for (const auto* list : {&e.gate, &e.up, &e.down})
      for (const MatMul& m : *list) f(m);
    if (e.shared_gate.out_features() > 0)
      for (const MatMul* m : {&e.shared_gate, &e.shared_up, &e.shared_down}) f(*m);
  }
  f(w.head);
}
}  // namespace

Transformer::~Transformer() {
  stop_preparing_ = true;
  if (preparer_.joinable()) preparer_.join();
}

namespace {
// Background preparation must not outlive the libraries it calls: a model held in a static is destroyed
// after oneDNN's own statics, so the process's exit first stops every preparer (exit_stops_preparers below).
std::mutex preparers_mutex;
std::condition_variable preparers_done;
int preparers_running = 0;
std::atomic<bool> process_exiting{false};

void exit_stops_preparers() {
  process_exiting = true;
  std::unique_lock<std::mutex> lock(preparers_mutex);
  preparers_done.wait(lock, [] { return preparers_running == 0; });
}
}  // namespace

void Transformer::prepare_weights_in_background() {
  std::vector<const MatMul*> todo;
  for_each_matrix(weights_, [&](const MatMul& m) {
    if (m.preparable()) todo.push_back(&m);
  });
  for (const MatMul* m : todo) bytes_to_prepare_ += m->weight_bytes();
  if (todo.empty()) return;
  // The first reorder here, on this thread, creates oneDNN's statics before the exit hook is registered, so
  // the hook runs before they are destroyed.
  const size_t first_bytes = todo.front()->weight_bytes();
  todo.front()->prepare();
  bytes_prepared_ += first_bytes;
  todo.erase(todo.begin());
  static const bool hooked = (std::atexit(exit_stops_preparers), true);
  (void)hooked;
  {
    std::lock_guard<std::mutex> lock(preparers_mutex);
    ++preparers_running;
  }
  preparer_ = std::thread([this, todo = std::move(todo)] {
    // One core at low priority: the forwards that run meanwhile (from the mapped weights) come first.
    omp_set_num_threads(1);
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
    for (const MatMul* m : todo) {
      if (stop_preparing_ || process_exiting) break;
      const size_t bytes = m->weight_bytes();
      m->prepare();
      bytes_prepared_ += bytes;
    }
    std::lock_guard<std::mutex> lock(preparers_mutex);
    --preparers_running;
    preparers_done.notify_all();
  });
}

double Transformer::weights_prepared() const {
  return bytes_to_prepare_ == 0
             ? 1.0
             : static_cast<double>(bytes_prepared_) / static_cast<double>(bytes_to_prepare_);
}

size_t Transformer::weight_bytes() const {
  size_t bytes = 0;
  for_each_matrix(weights_, [&](const MatMul& m) { bytes += m.weight_bytes(); });
  if (weights_.embedding_blocks) {
    if (!weights_.head.same_weights(*weights_.embedding_blocks))
      bytes += weights_.embedding_blocks->weight_bytes();
  } else if (weights_.embedding) {
    bytes += weights_.embedding->nbytes;
  }
  auto vec = [](const std::vector<float>& v) { return v.size() * sizeof(float); };
  for (const auto& L : weights_.layers) {
    bytes += vec(L.attn_norm) + vec(L.ffn_norm) + vec(L.q_bias) + vec(L.k_bias) + vec(L.v_bias);
    bytes += vec(L.q_norm) + vec(L.k_norm) + (L.moe ? vec(L.moe->expert_bias) : 0);
  }
  return bytes + vec(weights_.final_norm);
}

size_t Transformer::matrix_bytes() const {
  size_t bytes = 0;
  for_each_matrix(weights_, [&](const MatMul& m) { bytes += m.weight_bytes(); });
  return bytes;
}

int64_t Transformer::q8_matrices() const {
  int64_t n = 0;
  for_each_matrix(weights_, [&](const MatMul& m) { n += m.is_q8(); });
  return n;
}

int64_t Transformer::packed_matrices() const {
  int64_t n = 0;
  for_each_matrix(weights_, [&](const MatMul& m) { n += m.is_packed(); });
  return n;
}

int64_t Transformer::packed_on_use_matrices() const {
  int64_t n = 0;
  for (const auto& layer : weights_.layers) {
    if (!layer.moe || !layer.moe->packed_on_use) continue;
    for (size_t e = 0; e < layer.moe->gate.size(); ++e) n += 3 * layer.moe->packed_on_use[e].packed;
  }
  return n;
}

void pack_experts_on_first_use(MoeWeights& moe, std::function<void(const void*, size_t)> release) {
  moe.packed_on_use = std::make_unique<MoeWeights::PackedOnUse[]>(moe.gate.size());
  moe.release = std::move(release);
}

namespace {

// Expert e's three matrices packed into panels, when all three are in-place blocks that can be; their mapped
// pages given back after.
void pack_expert(const MoeWeights& w, size_t e, MoeWeights::PackedOnUse& out) {
  const MatMul* parts[3] = {&w.gate[e], &w.up[e], &w.down[e]};
  for (const MatMul* m : parts)
    if (!m->is_ggml() ||
        !quant::LinearPacked::can_pack(m->ggml()->type(), m->out_features(), m->in_features()))
      return;
  MatMul* packed[3] = {&out.gate, &out.up, &out.down};
  for (int i = 0; i < 3; ++i) {
    const quant::LinearGgml& blocks = *parts[i]->ggml();
    *packed[i] =
        quant::LinearPacked::pack(blocks.type(), blocks.data(), blocks.out_features(), blocks.in_features());
    if (w.release && !blocks.owns_data()) w.release(blocks.data(), blocks.weight_bytes());
  }
  out.packed = true;
}

// Expert e's matrices as they run: the ones packed on first use once they are, else the ones loaded.
struct ExpertMatrices {
  const MatMul &gate, &up, &down;
};
ExpertMatrices expert_matrices(const MoeWeights& w, int64_t e) {
  const auto i = static_cast<size_t>(e);
  if (w.packed_on_use && w.packed_on_use[i].packed) {
    const MoeWeights::PackedOnUse& p = w.packed_on_use[i];
    return {p.gate, p.up, p.down};
  }
  return {w.gate[i], w.up[i], w.down[i]};
}

}  // namespace

int64_t Transformer::ggml_matrices() const {
  int64_t n = 0;
  for_each_matrix(weights_, [&](const MatMul& m) { n += m.is_ggml(); });
  return n;
}

std::string Transformer::ggml_type_name() const {
  std::string name;
  for_each_matrix(weights_, [&](const MatMul& m) {
    if (name.empty() && m.is_ggml()) name = ggml_type_info(static_cast<uint32_t>(m.ggml()->type()))->name;
    if (name.empty() && m.is_packed()) name = ggml_type_info(static_cast<uint32_t>(m.packed()->type()))->name;
  });
  return name;
}

int64_t Transformer::matrices() const {
  int64_t n = 0;
  for_each_matrix(weights_, [&](const MatMul&) { ++n; });
  return n;
}

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
  if (input.logits_to < 0 || input.logits_to > seq ||
      (input.logits_to > 0 && input.logits_to <= input.logits_from))
    fail("forward: logits_to ", input.logits_to, " outside (logits_from ", input.logits_from, ", ", seq, "]");
  for (int32_t t : input.tokens)
    if (t < 0 || t >= mi.vocab_size)
      fail("forward: token id ", t, " is outside the vocabulary [0, ", mi.vocab_size, ")");
  if (!input.positions.empty() && input.positions.size() != input.tokens.size())
    fail("forward: ", input.positions.size(), " positions given for ", input.tokens.size(), " tokens");
  if (!input.valid.empty() && input.valid.size() != input.tokens.size())
    fail("forward: ", input.valid.size(), " validity flags given for ", input.tokens.size(), " tokens");
  for (int64_t p : input.positions)
    if (p < 0 || p >= mi.max_seq_len) fail("forward: position ", p, " outside [0, ", mi.max_seq_len, ")");
  const CacheOp op = input.cache ? input.cache_op : CacheOp::kNone;
  if (input.cache_op != CacheOp::kNone && !input.cache) fail("forward: a cache operation needs a cache");
  KvCache* cache = input.cache;
  const int64_t offset = op == CacheOp::kReuse    ? input.cache_offset
                         : op == CacheOp::kExtend ? (cache->empty() ? 0 : cache->seq_len)
                                                  : 0;
  if (input.attention_block < 0) fail("forward: attention_block ", input.attention_block, " is negative");
  if (op == CacheOp::kExtend) {
    if (batch != 1) fail("forward: the block cache (CacheOp::kExtend) runs one row, not ", batch);
    if (!input.valid.empty()) fail("forward: the block cache (CacheOp::kExtend) takes no validity flags");
    if (input.cache_append < 0 || input.cache_append > seq)
      fail("forward: cache_append ", input.cache_append, " outside [0, ", seq, "]");
    if (!cache->empty() && cache->kv_dim != mi.n_kv_heads * mi.head_dim)
      fail("forward: the cache holds another model's keys");
  }
  if (op == CacheOp::kReuse) {
    if (cache->empty() || cache->batch != batch)
      fail("forward: the cache holds ", cache->batch, " rows, not the ", batch,
           " of this call (store it first)");
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
  const int64_t widest_ffn = std::max(ffn, config_.moe.expert_ffn * std::max<int64_t>(1, config_.moe.shared));
  gate_.resize(n * widest_ffn);
  up_.resize(n * widest_ffn);

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
  const int64_t n_layers = static_cast<int64_t>(weights_.layers.size());
  if (op == CacheOp::kExtend && cache->empty()) cache->reset(n_layers, 1, 0, kv_dim);
  const uint8_t* key_valid = nullptr;
  if (op == CacheOp::kReuse) {
    if (std::find(cache->valid.begin(), cache->valid.end(), 0) != cache->valid.end())
      key_valid = cache->valid.data();
  } else if (any_invalid) {
    key_valid = query_valid.data();
  }

  auto record = [&](const float* src) {
    if (input.hidden_states) input.hidden_states->emplace_back(src, src + seq * d);  // row 0
  };
  if (input.hidden_states) input.hidden_states->clear();

  embed(input.tokens, x_.data());
  record(x_.data());
  if (token_in_one_region_ && op == CacheOp::kExtend && n <= MatMul::kShareRows && !input.hidden_states &&
      !any_invalid && omp_get_max_threads() > 1 && !omp_in_parallel() && token_in_one_region_possible()) {
    auto logits = run_token(n, positions.data(), *cache, offset, input.cache_append, input.attention_block,
                            input.logits_from, logits_end(input));
    cache->seq_len = offset + input.cache_append;
    cache->valid.assign(static_cast<size_t>(cache->seq_len), 1);
    ++forwards_in_one_region_;
    return logits;
  }
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    const LayerWeights& w = weights_.layers[l];
    rms_norm(x_.data(), w.attn_norm.data(), n, d, config_.rms_eps, h_.data());
    multiply_group(MatmulRole::kQkv, {&w.q, &w.k, &w.v}, h_.data(), n, {q_.data(), k_.data(), v_.data()});
    if (config_.qkv_bias) {
      add_bias(q_.data(), w.q_bias.data(), n, q_dim);
      add_bias(k_.data(), w.k_bias.data(), n, kv_dim);
      add_bias(v_.data(), w.v_bias.data(), n, kv_dim);
    }
    if (config_.qk_norm) {
      rms_norm(q_.data(), w.q_norm.data(), n * mi.n_heads, hd, config_.rms_eps, q_.data());
      rms_norm(k_.data(), w.k_norm.data(), n * mi.n_kv_heads, hd, config_.rms_eps, k_.data());
    }
    rope_neox(q_.data(), n, mi.n_heads, positions.data(), rope_, hd);
    rope_neox(k_.data(), n, mi.n_kv_heads, positions.data(), rope_, hd);
    const int64_t block = input.attention_block;
    if (op == CacheOp::kNone) {
      attention(q_.data(), k_.data(), v_.data(), batch, seq, seq, mi.n_heads, mi.n_kv_heads, hd, key_valid,
                att_.data(), block);
    } else if (op == CacheOp::kExtend) {
      // Append this call's keys/values, attend over cache + call, then keep only the cache_append leading
      // ones.
      std::vector<float>& ck = cache->k[l];
      std::vector<float>& cv = cache->v[l];
      ck.insert(ck.end(), k_.begin(), k_.begin() + seq * kv_dim);
      cv.insert(cv.end(), v_.begin(), v_.begin() + seq * kv_dim);
      attention(q_.data(), ck.data(), cv.data(), 1, seq, offset + seq, mi.n_heads, mi.n_kv_heads, hd, nullptr,
                att_.data(), block, offset);
      ck.resize(static_cast<size_t>((offset + input.cache_append) * kv_dim));
      cv.resize(ck.size());
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
    multiply(MatmulRole::kOut, w.o, att_.data(), n, x_.data(), /*accumulate=*/true);

    rms_norm(x_.data(), w.ffn_norm.data(), n, d, config_.rms_eps, h_.data());
    feed_forward(w, n, x_.data());
    if (l + 1 < weights_.layers.size()) record(x_.data());
  }
  if (op == CacheOp::kExtend) {
    cache->seq_len = offset + input.cache_append;
    cache->valid.assign(static_cast<size_t>(cache->seq_len), 1);
  }

  // Final norm and head only for the positions whose logits are wanted.
  const int64_t keep = logits_end(input) - input.logits_from;
  std::vector<float> normed(batch * keep * d);
  for (int64_t b = 0; b < batch; ++b)
    rms_norm(x_.data() + (b * seq + input.logits_from) * d, weights_.final_norm.data(), keep, d,
             config_.rms_eps, normed.data() + b * keep * d);
  if (input.hidden_states) {
    std::vector<float> all(seq * d);
    rms_norm(x_.data(), weights_.final_norm.data(), seq, d, config_.rms_eps, all.data());
    record(all.data());
  }
  std::vector<float> logits(static_cast<size_t>(batch * keep * mi.vocab_size));
  multiply(MatmulRole::kHead, weights_.head, normed.data(), batch * keep, logits.data(),
           /*accumulate=*/false);
  return logits;
}

bool Transformer::token_in_one_region_possible() const {
  // DLLM_TOKEN_IN_ONE_REGION=0 runs a token's forward as any other (A/B timing of whole commands).
  static const bool enabled = [] {
    const char* env = std::getenv("DLLM_TOKEN_IN_ONE_REGION");
    if (!env || std::string(env) == "1") return true;
    if (std::string(env) == "0") return false;
    fail("DLLM_TOKEN_IN_ONE_REGION='", env, "' must be 0 (a region per step) or 1 (one region a token)");
  }();
  // Once true it stays true: a 16-bit weight still in place moves to the gemv layout once (prepare), and back
  // never. Until then it is checked again each token.
  if (!enabled || token_in_one_region_possible_) return enabled;
  const auto group = [](std::initializer_list<const MatMul*> ws) {
    return MatMul::can_share_group({ws.begin(), ws.size()});
  };
  bool possible = group({&weights_.head});
  for (const LayerWeights& w : weights_.layers)
    possible = possible && !w.moe && group({&w.q, &w.k, &w.v}) && group({&w.o}) && group({&w.gate, &w.up}) &&
               group({&w.down});
  token_in_one_region_possible_ = possible;
  return possible;
}

std::vector<float> Transformer::run_token(int64_t n, const int64_t* positions, KvCache& cache, int64_t offset,
                                          int64_t cache_append, int64_t block, int64_t keep_from,
                                          int64_t keep_to) {
  const ModelInfo& mi = config_.info;
  const int64_t d = mi.d_model, hd = mi.head_dim, ffn = mi.ffn_hidden;
  const int64_t q_dim = mi.n_heads * hd, kv_dim = mi.n_kv_heads * hd, keep = keep_to - keep_from;
  const float eps = config_.rms_eps;
  std::vector<float> normed(static_cast<size_t>(keep * d));
  std::vector<float> logits(static_cast<size_t>(keep * mi.vocab_size));
  const bool profile = KernelProfile::enabled;
  std::optional<SpinBarrier> barrier;
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
#pragma omp single
    barrier.emplace(threads);  // the team's size is known here (its implicit barrier: once a token)
    // Every step ends at the barrier; thread 0 times each step to its barrier when KernelProfile is on.
    auto clock = std::chrono::steady_clock::now();
    const auto done = [&](KernelKind kind, std::initializer_list<const MatMul*> ws = {},
                          MatmulRole role = MatmulRole::kCount) {
      barrier->wait();
      if (!profile || t != 0) return;
      const auto now = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(now - clock).count();
      clock = now;
      KernelProfile::seconds[static_cast<int>(kind)] += seconds;
      if (role == MatmulRole::kCount) return;
      role_stats_.seconds[static_cast<int>(role)] += seconds;
      for (const MatMul* w : ws)
        role_stats_.bytes[static_cast<int>(role)] += static_cast<double>(w->weight_bytes());
    };
    const auto multiply_share = [&](MatmulRole role, std::initializer_list<const MatMul*> ws, const float* x,
                                    int64_t rows, std::initializer_list<float*> ys, bool accumulate) {
      MatMul::forward_group_share({ws.begin(), ws.size()}, x, rows, {ys.begin(), ys.size()}, accumulate, t,
                                  threads);
      done(KernelKind::kMatmul, ws, role);
    };
    for (const LayerWeights& w : weights_.layers) {
      const size_t l = static_cast<size_t>(&w - weights_.layers.data());
      std::vector<float>& ck = cache.k[l];
      std::vector<float>& cv = cache.v[l];
      if (t == 0) rms_norm(x_.data(), w.attn_norm.data(), n, d, eps, h_.data());
      done(KernelKind::kNorm);
      multiply_share(MatmulRole::kQkv, {&w.q, &w.k, &w.v}, h_.data(), n, {q_.data(), k_.data(), v_.data()},
                     false);
      if (t == 0) {  // biases, q/k norms, RoPE and the cache append: counted as rope
        if (config_.qkv_bias) {
          add_bias(q_.data(), w.q_bias.data(), n, q_dim);
          add_bias(k_.data(), w.k_bias.data(), n, kv_dim);
          add_bias(v_.data(), w.v_bias.data(), n, kv_dim);
        }
        if (config_.qk_norm) {
          rms_norm(q_.data(), w.q_norm.data(), n * mi.n_heads, hd, eps, q_.data());
          rms_norm(k_.data(), w.k_norm.data(), n * mi.n_kv_heads, hd, eps, k_.data());
        }
        rope_neox(q_.data(), n, mi.n_heads, positions, rope_, hd);
        rope_neox(k_.data(), n, mi.n_kv_heads, positions, rope_, hd);
        ck.insert(ck.end(), k_.begin(), k_.begin() + n * kv_dim);
        cv.insert(cv.end(), v_.begin(), v_.begin() + n * kv_dim);
      }
      done(KernelKind::kRope);
      attention_heads(q_.data(), ck.data(), cv.data(), 1, n, offset + n, mi.n_heads, mi.n_kv_heads, hd,
                      nullptr, att_.data(), block, offset, t * mi.n_heads / threads,
                      (t + 1) * mi.n_heads / threads);
      done(KernelKind::kAttention);
      multiply_share(MatmulRole::kOut, {&w.o}, att_.data(), n, {x_.data()}, true);
      if (t == 0) {
        ck.resize(static_cast<size_t>((offset + cache_append) * kv_dim));
        cv.resize(ck.size());
        rms_norm(x_.data(), w.ffn_norm.data(), n, d, eps, h_.data());
      }
      done(KernelKind::kNorm);
      multiply_share(MatmulRole::kGateUp, {&w.gate, &w.up}, h_.data(), n, {gate_.data(), up_.data()}, false);
      // Split at multiples of 8: silu_mul's vector lanes and scalar tail then fall as in one call.
      const int64_t total = n * ffn, begin = t * total / threads / 8 * 8;
      const int64_t end = t + 1 == threads ? total : (t + 1) * total / threads / 8 * 8;
      silu_mul(gate_.data() + begin, up_.data() + begin, end - begin, gate_.data() + begin);
      done(KernelKind::kActivation);
      multiply_share(MatmulRole::kDown, {&w.down}, gate_.data(), n, {x_.data()}, true);
    }
    if (t == 0) rms_norm(x_.data() + keep_from * d, weights_.final_norm.data(), keep, d, eps, normed.data());
    done(KernelKind::kNorm);
    multiply_share(MatmulRole::kHead, {&weights_.head}, normed.data(), keep, {logits.data()}, false);
  }
  return logits;
}

const char* Transformer::matmul_role_name(MatmulRole role) {
  static const char* const kNames[] = {"q/k/v", "o", "gate/up", "down", "head"};
  return kNames[static_cast<int>(role)];
}

void Transformer::multiply(MatmulRole role, const MatMul& w, const float* x, int64_t n, float* y,
                           bool accumulate) {
  const MatMul* ws[] = {&w};
  timed(role, ws, [&] { w.forward(x, n, y, accumulate); });
}

void Transformer::multiply_group(MatmulRole role, std::initializer_list<const MatMul*> ws, const float* x,
                                 int64_t n, std::initializer_list<float*> ys) {
  const std::span<const MatMul* const> matrices(ws.begin(), ws.size());
  timed(role, matrices, [&] { MatMul::forward_group(matrices, x, n, {ys.begin(), ys.size()}); });
}

template <class F>
void Transformer::timed(MatmulRole role, std::span<const MatMul* const> ws, F&& f) {
  if (!KernelProfile::enabled) return f();
  const auto start = std::chrono::steady_clock::now();
  f();
  const int r = static_cast<int>(role);
  role_stats_.seconds[r] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const MatMul* w : ws) role_stats_.bytes[r] += static_cast<double>(w->weight_bytes());
}

void Transformer::feed_forward(const LayerWeights& w, int64_t n, float* x) {
  if (w.moe) return mixture_of_experts(*w.moe, n, x);
  const int64_t ffn = w.gate.out_features();
  multiply_group(MatmulRole::kGateUp, {&w.gate, &w.up}, h_.data(), n, {gate_.data(), up_.data()});
  silu_mul(gate_.data(), up_.data(), n * ffn, gate_.data());
  multiply(MatmulRole::kDown, w.down, gate_.data(), n, x, /*accumulate=*/true);
}

// Routing as LLaDA2MoeGate / Qwen3-MoE do it, in f32: scores from the router logits (sigmoid or softmax), the
// choice on scores + expert_bias (limited to the best groups, a group scored by its two best experts), the
// weights from the unbiased scores. Then the tokens are grouped by expert so that each chosen expert runs one
// matmul over all its tokens, and the weighted outputs are added back per token.
void Transformer::mixture_of_experts(const MoeWeights& w, int64_t n, float* x) {
  const TransformerConfig::Moe& cfg = config_.moe;
  const int64_t d = config_.info.d_model, E = cfg.experts, K = cfg.used;
  router_.resize(static_cast<size_t>(n * E));
  w.router.forward(h_.data(), n, router_.data());

  const bool sigmoid = cfg.gating == TransformerConfig::Moe::Gating::kSigmoid;
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(static_cast<size_t>(E));  // (token, weight)
  std::vector<float> score(static_cast<size_t>(E)), choice(static_cast<size_t>(E));
  std::vector<int64_t> order(static_cast<size_t>(E));
  std::vector<std::pair<float, int64_t>> group(static_cast<size_t>(cfg.groups));
  std::vector<uint8_t> keep(static_cast<size_t>(cfg.groups));
  const int64_t per_group = E / cfg.groups;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  auto better = [](float a, int64_t ia, float b, int64_t ib) { return a > b || (a == b && ia < ib); };
  for (int64_t t = 0; t < n; ++t) {
    const float* logit = router_.data() + t * E;
    if (sigmoid) {
      for (int64_t e = 0; e < E; ++e) score[e] = 1.0f / (1.0f + std::exp(-logit[e]));
    } else {
      const float max = *std::max_element(logit, logit + E);
      float sum = 0;
      for (int64_t e = 0; e < E; ++e) sum += (score[e] = std::exp(logit[e] - max));
      for (int64_t e = 0; e < E; ++e) score[e] /= sum;
    }
    for (int64_t e = 0; e < E; ++e) choice[e] = score[e] + (w.expert_bias.empty() ? 0.0f : w.expert_bias[e]);
    if (cfg.groups > 1 && cfg.groups_used < cfg.groups) {
      for (int64_t g = 0; g < cfg.groups; ++g) {
        const float* c = choice.data() + g * per_group;
        float best = neg_inf, second = neg_inf;
        for (int64_t e = 0; e < per_group; ++e) {
          if (c[e] > best) {
            second = best;
            best = c[e];
          } else if (c[e] > second) {
            second = c[e];
          }
        }
        group[g] = {best + second, g};
      }
      std::partial_sort(
          group.begin(), group.begin() + cfg.groups_used, group.end(),
          [&](const auto& a, const auto& b) { return better(a.first, a.second, b.first, b.second); });
      std::fill(keep.begin(), keep.end(), 0);
      for (int64_t g = 0; g < cfg.groups_used; ++g) keep[group[g].second] = 1;
      for (int64_t e = 0; e < E; ++e)
        if (!keep[e / per_group]) choice[e] = neg_inf;
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int64_t a, int64_t b) { return better(choice[a], a, choice[b], b); });
    float sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += score[order[k]];
    // The sigmoid router (LLaDA2MoeGate) normalises whenever it picks more than one expert, with +1e-20.
    const bool normalize = sigmoid ? K > 1 : cfg.normalize;
    const float denominator = sigmoid ? sum + 1e-20f : sum;
    for (int64_t k = 0; k < K; ++k) {
      const float weight = normalize ? score[order[k]] / denominator : score[order[k]];
      by_expert[order[k]].emplace_back(t, weight * cfg.routed_scale);
    }
  }

  // y = Σ weight · expert(h) + shared(h), then x += y (the reference's order of the sums).
  // The chosen experts run in parallel, one expert per thread at a time (each expert's matmuls
  // single-threaded: the nested parallel regions inside them run on one thread): with 1-3 rows per expert,
  // splitting one small matmul over the threads cost a fork/join per matmul (3 per expert, ~375 per
  // layer-step for a 32-token block) and left each thread a sliver of rows. Outputs land in per-expert rows;
  // the weighted sum is then taken serially in expert order, as before, so the result does not depend on the
  // thread count.
  std::vector<int64_t> active, first_row(static_cast<size_t>(E) + 1, 0);
  for (int64_t e = 0; e < E; ++e) {
    first_row[e + 1] = first_row[e] + static_cast<int64_t>(by_expert[e].size());
    if (by_expert[e].empty()) continue;
    active.push_back(e);
    const int64_t m = static_cast<int64_t>(by_expert[e].size()), width = w.gate[e].out_features();
    // Packed here, before the parallel region: weight_bytes below are then the matrices that run. The
    // packing is the mapped blocks' bytes re-ordered (a few ms an expert of LLaDA2-mini's size), once.
    if (w.packed_on_use) {
      auto& slot = w.packed_on_use[static_cast<size_t>(e)];
      std::call_once(slot.once, [&] { pack_expert(w, static_cast<size_t>(e), slot); });
    }
    moe_stats_.experts_run += 1;
    const ExpertMatrices mats = expert_matrices(w, e);
    moe_stats_.expert_bytes +=
        static_cast<double>(mats.gate.weight_bytes() + mats.up.weight_bytes() + mats.down.weight_bytes());
    moe_stats_.expert_flops += 2.0 * 3.0 * static_cast<double>(m * width * d);
  }
  // Longest first (most tokens), so that the last experts to start are the short ones and no thread idles
  // long.
  std::vector<int64_t> run_order = active;
  std::stable_sort(run_order.begin(), run_order.end(),
                   [&](int64_t a, int64_t b) { return by_expert[a].size() > by_expert[b].size(); });
  const auto experts_start = std::chrono::steady_clock::now();
  expert_rows_.resize(static_cast<size_t>(first_row[E] * d));  // each expert's outputs, rows in routing order
  {
    ScopedKernelTimer timer(KernelKind::kMatmul);  // the timers inside the parallel region do not count
    const auto count = static_cast<int64_t>(active.size());
#pragma omp parallel if (count > 1)
    {
      std::vector<float> in, g, u;
#pragma omp for schedule(dynamic, 1)
      for (int64_t a = 0; a < count; ++a) {
        const int64_t e = run_order[a];
        const auto& tokens = by_expert[e];
        const int64_t m = static_cast<int64_t>(tokens.size()), width = w.gate[e].out_features();
        const auto [gate, up, down] = expert_matrices(w, e);
        in.resize(static_cast<size_t>(m * d));
        g.resize(static_cast<size_t>(m * width));
        u.resize(g.size());
        for (int64_t i = 0; i < m; ++i) std::copy_n(h_.data() + tokens[i].first * d, d, in.data() + i * d);
        if (gate.is_ggml() && up.is_ggml()) {  // in quantised once for both
          quant::LinearGgml::forward_shared_input(*gate.ggml(), g.data(), *up.ggml(), u.data(), in.data(), m);
        } else {
          gate.forward(in.data(), m, g.data());
          up.forward(in.data(), m, u.data());
        }
        silu_mul(g.data(), u.data(), m * width, g.data());
        down.forward(g.data(), m, expert_rows_.data() + first_row[e] * d);
      }
    }
  }
  expert_out_.assign(static_cast<size_t>(n * d), 0.0f);
  for (int64_t e : active) {
    const auto& tokens = by_expert[e];
    for (size_t i = 0; i < tokens.size(); ++i) {
      float* y = expert_out_.data() + tokens[i].first * d;
      const float* p = expert_rows_.data() + (first_row[e] + static_cast<int64_t>(i)) * d;
      const float weight = tokens[i].second;
      for (int64_t j = 0; j < d; ++j) y[j] += weight * p[j];
    }
  }
  if (KernelProfile::enabled)
    moe_stats_.expert_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - experts_start).count();
  if (w.shared_gate.out_features() > 0) {
    const int64_t width = w.shared_gate.out_features();
    w.shared_gate.forward(h_.data(), n, gate_.data());
    w.shared_up.forward(h_.data(), n, up_.data());
    silu_mul(gate_.data(), up_.data(), n * width, gate_.data());
    w.shared_down.forward(gate_.data(), n, expert_out_.data(), /*accumulate=*/true);
  }
  for (int64_t i = 0; i < n * d; ++i) x[i] += expert_out_[i];
}

}  // namespace dllm
