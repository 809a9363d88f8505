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
#include "model/moe_routing.h"

namespace dllm {

Transformer::Transformer(TransformerConfig config, std::unique_ptr<Checkpoint> checkpoint,
                         TransformerWeights weights)
    : config_(std::move(config)),
      checkpoint_(std::move(checkpoint)),
      weights_(std::move(weights)),
      rope_(config_.rotary_dim > 0 ? config_.rotary_dim : config_.info.head_dim, config_.rope_theta, 512,
            config_.rope_freq_factors),
      backend_(make_backend(BackendKind::kCpu)) {}

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

// The norm and bias vectors the forward hands to the backend (the router's expert_bias stays on the host).
template <class F>
void for_each_vector(const TransformerWeights& w, F&& f) {
  for (const LayerWeights& L : w.layers)
    for (const auto* v : {&L.attn_norm, &L.ffn_norm, &L.q_bias, &L.k_bias, &L.v_bias, &L.q_norm, &L.k_norm})
      if (!v->empty()) f(*v);
  f(w.final_norm);
}
}  // namespace

void Transformer::set_backend(std::unique_ptr<Backend> backend) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for_each_matrix(weights_, [&](const MatMul& m) { bytes += backend->bytes_to_hold(m); });
  for_each_vector(weights_, [&](const std::vector<float>& v) { bytes += v.size() * sizeof(float); });
  backend->reserve(bytes);
  for_each_matrix(weights_, [&](const MatMul& m) { backend->hold(m); });
  for_each_vector(weights_, [&](const std::vector<float>& v) { backend->hold(v); });
  backend_ = std::move(backend);
}

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
  for_each_vector(weights_, [&](const std::vector<float>& v) { bytes += v.size() * sizeof(float); });
  for (const auto& L : weights_.layers)
    if (L.moe) bytes += L.moe->expert_bias.size() * sizeof(float);
  return bytes;
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
ExpertMatrices expert_matrices(const MoeWeights& w, int64_t e) {
  const auto i = static_cast<size_t>(e);
  if (w.packed_on_use && w.packed_on_use[i].packed) {
    const MoeWeights::PackedOnUse& p = w.packed_on_use[i];
    return {p.gate, p.up, p.down};
  }
  return {w.gate[i], w.up[i], w.down[i]};
}

}  // namespace

ExpertMatrices expert_matrices_packing_on_use(const MoeWeights& w, int64_t e) {
  if (w.packed_on_use) {
    auto& slot = w.packed_on_use[static_cast<size_t>(e)];
    std::call_once(slot.once, [&] { pack_expert(w, static_cast<size_t>(e), slot); });
  }
  return expert_matrices(w, e);
}

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
  return capture([&] { return run(input, nullptr); });
}

Expected<std::vector<LogitStats>> Transformer::forward_stats(const ForwardInput& input) {
  if (!reduces_on_device()) return Model::forward_stats(input);
  return capture([&] {
    std::vector<LogitStats> stats;
    run(input, &stats);
    return stats;
  });
}

bool Transformer::reduces_on_device() const {
  return backend_->kind() != BackendKind::kCpu;
}

std::vector<float> Transformer::run(const ForwardInput& input, std::vector<LogitStats>* stats) {
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
  Backend& B = *backend_;
  const int64_t n = batch * seq, d = mi.d_model, hd = mi.head_dim;
  const int64_t q_dim = mi.n_heads * hd, kv_dim = mi.n_kv_heads * hd, ffn = mi.ffn_hidden;
  using Slot = Backend::Slot;
  const Tensor x = B.activation(Slot::kX, n, d), h = B.activation(Slot::kH, n, d);
  const Tensor q = B.activation(Slot::kQ, n, q_dim), k = B.activation(Slot::kK, n, kv_dim),
               v = B.activation(Slot::kV, n, kv_dim), att = B.activation(Slot::kAtt, n, q_dim);

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
  const int64_t n_layers = static_cast<int64_t>(weights_.layers.size());
  if (op == CacheOp::kStore) {
    B.kv_reset(*cache, n_layers, batch, seq, kv_dim);
    if (!query_valid.empty()) cache->valid = query_valid;
  }
  if (op == CacheOp::kExtend && cache->empty()) B.kv_reset(*cache, n_layers, 1, 0, kv_dim);
  std::span<const uint8_t> key_valid;
  if (op == CacheOp::kReuse) {
    if (std::find(cache->valid.begin(), cache->valid.end(), 0) != cache->valid.end())
      key_valid = cache->valid;
  } else if (any_invalid) {
    key_valid = query_valid;
  }

  std::vector<float> staging;
  auto record = [&](const Tensor& t) {  // row 0
    if (!input.hidden_states) return;
    input.hidden_states->emplace_back(static_cast<size_t>(seq * d));
    B.read(t, 0, seq, input.hidden_states->back().data());
  };
  if (input.hidden_states) input.hidden_states->clear();

  // The embedding table stays on the host (as llama.cpp keeps token_embd): n rows are looked up here and
  // written to the backend, the table itself never copied to a device.
  float* embedded = B.host(x);
  if (!embedded) {
    staging.resize(static_cast<size_t>(n * d));
    embedded = staging.data();
  }
  embed(input.tokens, embedded);
  B.begin({positions, &rope_, key_valid,
           any_invalid ? std::span<const uint8_t>(query_valid) : std::span<const uint8_t>()});
  struct Abandon {  // a forward that throws leaves no half-recorded work behind
    Backend& b;
    bool done = false;
    ~Abandon() {
      if (!done) b.abandon();
    }
  } abandon{B};
  B.write(x, embedded);
  record(x);
  if (B.kind() == BackendKind::kCpu && !stats && token_in_one_region_ && op == CacheOp::kExtend &&
      n <= MatMul::kShareRows && !input.hidden_states && !any_invalid && omp_get_max_threads() > 1 &&
      !omp_in_parallel() && token_in_one_region_possible()) {
    const TokenScratch scratch{B.host(x),
                               B.host(h),
                               B.host(q),
                               B.host(k),
                               B.host(v),
                               B.host(att),
                               B.host(B.activation(Slot::kGate, n, ffn)),
                               B.host(B.activation(Slot::kUp, n, ffn))};
    auto logits = run_token(scratch, n, positions.data(), *cache, offset, input.cache_append,
                            input.attention_block, input.logits_from, logits_end(input));
    cache->seq_len = offset + input.cache_append;
    cache->valid.assign(static_cast<size_t>(cache->seq_len), 1);
    ++forwards_in_one_region_;
    abandon.done = true;
    return logits;
  }
  for (int64_t l = 0; l < n_layers; ++l) {
    const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
    B.rms_norm(x, w.attn_norm, config_.rms_eps, h);
    multiply_group(MatmulRole::kQkv, {&w.q, &w.k, &w.v}, h, {q, k, v});
    if (config_.qkv_bias) {
      B.add_bias(q, w.q_bias);
      B.add_bias(k, w.k_bias);
      B.add_bias(v, w.v_bias);
    }
    if (config_.qk_norm) {
      B.rms_norm(q.as(n * mi.n_heads, hd), w.q_norm, config_.rms_eps, q.as(n * mi.n_heads, hd));
      B.rms_norm(k.as(n * mi.n_kv_heads, hd), w.k_norm, config_.rms_eps, k.as(n * mi.n_kv_heads, hd));
    }
    B.rope(q, mi.n_heads);
    B.rope(k, mi.n_kv_heads);
    AttentionShape shape{batch, seq, seq, mi.n_heads, mi.n_kv_heads, hd, input.attention_block, 0};
    if (op == CacheOp::kNone) {
      B.attention(q, k, v, shape, att);
    } else if (op == CacheOp::kExtend) {
      // Append this call's keys/values, attend over cache + call, then keep only the cache_append leading
      // ones.
      B.kv_write(*cache, l, k, v, 1, seq, offset);
      shape.kv_len = offset + seq;
      shape.q_offset = offset;
      B.attention(q, B.kv_keys(*cache, l, offset + seq), B.kv_values(*cache, l, offset + seq), shape, att);
      B.kv_truncate(*cache, l, offset + input.cache_append);
    } else {
      // kStore writes every position; kReuse overwrites its range and attends over the whole cached rows.
      B.kv_write(*cache, l, k, v, batch, seq, offset);
      const int64_t len = cache->seq_len;
      shape.kv_len = len;
      shape.block = 0;
      B.attention(q, B.kv_keys(*cache, l, batch * len), B.kv_values(*cache, l, batch * len), shape, att);
    }
    if (any_invalid) B.zero_invalid_rows(att);
    multiply(MatmulRole::kOut, w.o, att, x, /*accumulate=*/true);

    B.rms_norm(x, w.ffn_norm, config_.rms_eps, h);
    feed_forward(w, n, x, h);
    if (l + 1 < n_layers) record(x);
  }
  if (op == CacheOp::kExtend) {
    cache->seq_len = offset + input.cache_append;
    cache->valid.assign(static_cast<size_t>(cache->seq_len), 1);
  }

  // Final norm and head only for the positions whose logits are wanted.
  const int64_t keep = logits_end(input) - input.logits_from;
  Tensor kept = x;
  if (keep != seq) {
    kept = B.activation(Slot::kRows, batch * keep, d);
    for (int64_t b = 0; b < batch; ++b) B.copy_rows(x, b * seq + input.logits_from, kept, b * keep, keep);
  }
  const Tensor normed = B.activation(Slot::kNormed, batch * keep, d);
  B.rms_norm(kept, weights_.final_norm, config_.rms_eps, normed);
  if (input.hidden_states) {
    const Tensor all = B.activation(Slot::kRows, seq, d);
    B.rms_norm(x.as(n, d), weights_.final_norm, config_.rms_eps, all);
    record(all);
  }
  const Tensor logits_t = B.activation(Slot::kLogits, batch * keep, mi.vocab_size);
  multiply(MatmulRole::kHead, weights_.head, normed, logits_t, /*accumulate=*/false);
  std::vector<float> logits;
  if (stats) {
    stats->resize(static_cast<size_t>(batch * keep));
    B.logit_stats(logits_t, batch * keep, stats->data());
  } else {
    logits.resize(static_cast<size_t>(batch * keep * mi.vocab_size));
    B.read(logits_t, 0, batch * keep, logits.data());
  }
  B.finish();
  abandon.done = true;
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

std::vector<float> Transformer::run_token(const TokenScratch& s, int64_t n, const int64_t* positions,
                                          KvCache& cache, int64_t offset, int64_t cache_append, int64_t block,
                                          int64_t keep_from, int64_t keep_to) {
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
      if (t == 0) rms_norm(s.x, w.attn_norm.data(), n, d, eps, s.h);
      done(KernelKind::kNorm);
      multiply_share(MatmulRole::kQkv, {&w.q, &w.k, &w.v}, s.h, n, {s.q, s.k, s.v}, false);
      if (t == 0) {  // biases, q/k norms, RoPE and the cache append: counted as rope
        if (config_.qkv_bias) {
          add_bias(s.q, w.q_bias.data(), n, q_dim);
          add_bias(s.k, w.k_bias.data(), n, kv_dim);
          add_bias(s.v, w.v_bias.data(), n, kv_dim);
        }
        if (config_.qk_norm) {
          rms_norm(s.q, w.q_norm.data(), n * mi.n_heads, hd, eps, s.q);
          rms_norm(s.k, w.k_norm.data(), n * mi.n_kv_heads, hd, eps, s.k);
        }
        rope_neox(s.q, n, mi.n_heads, positions, rope_, hd);
        rope_neox(s.k, n, mi.n_kv_heads, positions, rope_, hd);
        ck.insert(ck.end(), s.k, s.k + n * kv_dim);
        cv.insert(cv.end(), s.v, s.v + n * kv_dim);
      }
      done(KernelKind::kRope);
      attention_heads(s.q, ck.data(), cv.data(), 1, n, offset + n, mi.n_heads, mi.n_kv_heads, hd, nullptr,
                      s.att, block, offset, t * mi.n_heads / threads, (t + 1) * mi.n_heads / threads);
      done(KernelKind::kAttention);
      multiply_share(MatmulRole::kOut, {&w.o}, s.att, n, {s.x}, true);
      if (t == 0) {
        ck.resize(static_cast<size_t>((offset + cache_append) * kv_dim));
        cv.resize(ck.size());
        rms_norm(s.x, w.ffn_norm.data(), n, d, eps, s.h);
      }
      done(KernelKind::kNorm);
      multiply_share(MatmulRole::kGateUp, {&w.gate, &w.up}, s.h, n, {s.gate, s.up}, false);
      // Split at multiples of 8: silu_mul's vector lanes and scalar tail then fall as in one call.
      const int64_t total = n * ffn, begin = t * total / threads / 8 * 8;
      const int64_t end = t + 1 == threads ? total : (t + 1) * total / threads / 8 * 8;
      silu_mul(s.gate + begin, s.up + begin, end - begin, s.gate + begin);
      done(KernelKind::kActivation);
      multiply_share(MatmulRole::kDown, {&w.down}, s.gate, n, {s.x}, true);
    }
    if (t == 0) rms_norm(s.x + keep_from * d, weights_.final_norm.data(), keep, d, eps, normed.data());
    done(KernelKind::kNorm);
    multiply_share(MatmulRole::kHead, {&weights_.head}, normed.data(), keep, {logits.data()}, false);
  }
  return logits;
}

const char* Transformer::matmul_role_name(MatmulRole role) {
  static const char* const kNames[] = {"q/k/v", "o", "gate/up", "down", "head"};
  return kNames[static_cast<int>(role)];
}

void Transformer::multiply(MatmulRole role, const MatMul& w, const Tensor& x, const Tensor& y,
                           bool accumulate) {
  const MatMul* ws[] = {&w};
  timed(role, ws, [&] { backend_->matmul(w, x, y, accumulate); });
}

void Transformer::multiply_group(MatmulRole role, std::initializer_list<const MatMul*> ws, const Tensor& x,
                                 std::initializer_list<Tensor> ys) {
  const std::span<const MatMul* const> matrices(ws.begin(), ws.size());
  timed(role, matrices, [&] { backend_->matmul_group(matrices, x, {ys.begin(), ys.size()}); });
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

void Transformer::feed_forward(const LayerWeights& w, int64_t n, const Tensor& x, const Tensor& h) {
  if (w.moe) return mixture_of_experts(*w.moe, n, x, h);
  const int64_t ffn = w.gate.out_features();
  const Tensor gate = backend_->activation(Backend::Slot::kGate, n, ffn),
               up = backend_->activation(Backend::Slot::kUp, n, ffn);
  multiply_group(MatmulRole::kGateUp, {&w.gate, &w.up}, h, {gate, up});
  backend_->silu_mul(gate, up, gate);
  multiply(MatmulRole::kDown, w.down, gate, x, /*accumulate=*/true);
}

// The router's logits come to the host (n x experts numbers), the choice is made there (route_tokens), and
// the backend runs each chosen expert over its rows: y = Σ weight · expert(h) + shared(h), then x += y (the
// reference's order of the sums).
void Transformer::mixture_of_experts(const MoeWeights& w, int64_t n, const Tensor& x, const Tensor& h) {
  Backend& B = *backend_;
  const TransformerConfig::Moe& cfg = config_.moe;
  const int64_t d = config_.info.d_model, E = cfg.experts;
  const Tensor router = B.activation(Backend::Slot::kRouter, n, E);
  B.matmul(w.router, h, router, /*accumulate=*/false);
  router_.resize(static_cast<size_t>(n * E));
  B.read(router, 0, n, router_.data());
  const auto by_expert = route_tokens(cfg, w.expert_bias, router_.data(), n);

  std::vector<ExpertRun> runs;
  for (int64_t e = 0; e < E; ++e) {
    const auto& tokens = by_expert[static_cast<size_t>(e)];
    if (tokens.empty()) continue;
    const int64_t m = static_cast<int64_t>(tokens.size()), width = w.gate[e].out_features();
    // Packed here, before the experts run: weight_bytes below are then the matrices that run. The packing is
    // the mapped blocks' bytes re-ordered (a few ms an expert of LLaDA2-mini's size), once. A device backend
    // keeps the matrices it holds.
    if (w.packed_on_use && B.kind() == BackendKind::kCpu) {
      auto& slot = w.packed_on_use[static_cast<size_t>(e)];
      std::call_once(slot.once, [&] { pack_expert(w, static_cast<size_t>(e), slot); });
    }
    const ExpertMatrices mats =
        B.kind() == BackendKind::kCpu ? expert_matrices(w, e) : ExpertMatrices{w.gate[e], w.up[e], w.down[e]};
    moe_stats_.experts_run += 1;
    moe_stats_.expert_bytes +=
        static_cast<double>(mats.gate.weight_bytes() + mats.up.weight_bytes() + mats.down.weight_bytes());
    moe_stats_.expert_flops += 2.0 * 3.0 * static_cast<double>(m * width * d);
    ExpertRun run{&mats.gate, &mats.up, &mats.down, {}, {}};
    for (const auto& [token, weight] : tokens) {
      run.rows.push_back(token);
      run.weights.push_back(weight);
    }
    runs.push_back(std::move(run));
  }
  const auto experts_start = std::chrono::steady_clock::now();
  const Tensor y = B.activation(Backend::Slot::kExperts, n, d);
  B.experts(runs, h, y);
  if (KernelProfile::enabled)
    moe_stats_.expert_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - experts_start).count();
  if (w.shared_gate.out_features() > 0) {
    const int64_t width = w.shared_gate.out_features();
    const Tensor gate = B.activation(Backend::Slot::kGate, n, width),
                 up = B.activation(Backend::Slot::kUp, n, width);
    B.matmul(w.shared_gate, h, gate, false);
    B.matmul(w.shared_up, h, up, false);
    B.silu_mul(gate, up, gate);
    B.matmul(w.shared_down, gate, y, /*accumulate=*/true);
  }
  B.add(x, y);
}

}  // namespace dllm
