// The pre-norm transformer that LLaDA, Dream, LLaDA2 and SDAR share:
//   x = embed(tokens)
//   per layer: x += o(attn(rope(qnorm(q(norm(x)))), rope(knorm(k(norm(x)))), v(norm(x))));  x += ffn(norm(x))
//   logits = head(norm(x))
// with ffn = down(silu(gate(h)) * up(h)), or on mixture-of-experts layers the routed experts' weighted sum
// plus the shared expert. Optional parts: q/k biases (Dream), per-head q/k RMSNorm (LLaDA2, SDAR), partial
// RoPE (LLaDA2), block-causal attention (ForwardInput::attention_block). A family description
// (model/family.h, model/families/) maps its config.json and tensor names onto this.
#pragma once

#include <atomic>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "dllm/dllm.h"
#include "io/checkpoint.h"
#include "kernels/linear.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace dllm {

struct TransformerConfig {
  ModelInfo info;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool qkv_bias = false;
  bool tied_head = false;  // the head is the embedding table
  bool qk_norm = false;    // RMSNorm over head_dim on each q and k head, before RoPE (weights [head_dim])
  int64_t rotary_dim =
      0;  // < head_dim: partial RoPE on the first rotary_dim values of each head; 0 = head_dim
  // Per rotated pair j: its frequency is divided by rope_freq_factors[j] (Llama 3.1's rope_scaling
  // "llama3"; llama.cpp's rope_freqs tensor). Empty = plain RoPE.
  std::vector<float> rope_freq_factors;

  // Mixture of experts (LLaDA2 / Ling 2.0). Layers >= first_dense_layers route each token to `used` of
  // `experts` SwiGLU experts of width expert_ffn (plus `shared` always-on experts fused into one MLP of width
  // shared * expert_ffn); earlier layers keep the dense MLP of width ffn_hidden.
  struct Moe {
    int64_t experts = 0, used = 0, expert_ffn = 0, shared = 0, first_dense_layers = 0;
    int64_t groups = 1, groups_used = 1;  // group-limited choice: keep groups_used of `groups` groups first
    enum class Gating { kSoftmax, kSigmoid } gating = Gating::kSigmoid;
    bool expert_bias = false;   // a per-expert bias added to the scores for the choice only
    bool normalize = true;      // weights / their sum (LLaDA2: whenever used > 1)
    float routed_scale = 1.0f;  // routed_scaling_factor
  } moe;
  bool is_moe_layer(int64_t layer) const { return moe.experts > 0 && layer >= moe.first_dense_layers; }
};

// The routed experts of one mixture-of-experts layer and their router.
struct MoeWeights {
  MatMul router;                   // (experts, d), run in f32
  std::vector<float> expert_bias;  // (experts), empty when the family has none
  std::vector<MatMul> gate, up;    // per expert (expert_ffn, d)
  std::vector<MatMul> down;        // per expert (d, expert_ffn)
  MatMul shared_gate, shared_up;   // (shared * expert_ffn, d); absent when no shared expert
  MatMul shared_down;              // (d, shared * expert_ffn)

  // ExpertPacking::kOnFirstUse: expert e's gate / up / down are packed into 16-row panels
  // (quant::LinearPacked) from its in-place blocks the first time a token is routed to it, once
  // (std::call_once: the experts of a layer run on several threads), and then used instead of them; `release`
  // (may be empty) gives the mapped pages of the blocks back. Null: the experts run as loaded.
  struct PackedOnUse {
    std::once_flag once;
    bool packed = false;  // false: the expert cannot be packed (shape, type) and runs in place
    MatMul gate, up, down;
  };
  std::unique_ptr<PackedOnUse[]> packed_on_use;
  std::function<void(const void*, size_t)> release;
};

// Sets `moe` up to pack its experts on first use (see MoeWeights::PackedOnUse).
void pack_experts_on_first_use(MoeWeights& moe, std::function<void(const void*, size_t)> release = {});
// Expert e's matrices as they run on the CPU: packed into panels now (once, thread-safe) where `moe` was set
// up to pack on first use and the expert can be, else as loaded.
struct ExpertMatrices {
  const MatMul &gate, &up, &down;
};
ExpertMatrices expert_matrices_packing_on_use(const MoeWeights& moe, int64_t e);

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // (d_model)
  // Each matrix is an f32/bf16 Linear or 8-bit Q8_0 weights (MatMul); the loaders assign either.
  MatMul q, k, v;                             // (n_heads*hd, d), (n_kv_heads*hd, d), (n_kv_heads*hd, d)
  std::vector<float> q_bias, k_bias, v_bias;  // empty when the family has no qkv bias
  MatMul o;                                   // (d, n_heads*hd)
  std::vector<float> q_norm, k_norm;          // (head_dim), with TransformerConfig::qk_norm
  MatMul gate, up;                            // (ffn_hidden, d); dense layers
  MatMul down;                                // (d, ffn_hidden)
  std::unique_ptr<MoeWeights> moe;            // mixture-of-experts layers instead of gate/up/down
};

struct TransformerWeights {
  const TensorView* embedding = nullptr;  // (vocab, d), used in place from the mapped file
  // Set instead when the weights do not come from a file (random models for benchmarks).
  std::shared_ptr<TensorView> owned_embedding;
  std::shared_ptr<std::vector<uint8_t>> owned_embedding_data;
  // Set instead of `embedding` when the table is kept quantized (a Q8_0 / Q4_0 token_embd packed into panels,
  // or any quantized token_embd in 8 bits with kQ8); rows are dequantised on lookup. When the head is tied it
  // shares these weights (head.same_weights(*embedding_blocks)).
  std::optional<MatMul> embedding_blocks;
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // (d)
  MatMul head;                    // (vocab, d)
};

class Transformer final : public Model {
 public:
  Transformer(TransformerConfig config, std::unique_ptr<Checkpoint> checkpoint, TransformerWeights weights);
  ~Transformer() override;  // stops the background preparation
  const ModelInfo& info() const override { return config_.info; }
  // Reorder the matrices held in place (WeightLayout::kMappedThenBackground) into their faster layout on a
  // background thread, one at a time, in forward order, while forwards run on the mapped ones.
  void prepare_weights_in_background();
  double weights_prepared() const override;
  Expected<std::vector<float>> forward(const ForwardInput& input) override;
  Expected<std::vector<LogitStats>> forward_stats(const ForwardInput& input) override;
  bool reduces_on_device() const override;  // on a device backend
  // Bytes of the weights as held at run time: matrices (f32 / bf16 / 8-bit), the embedding table (mapped or
  // owned; counted once when it is the tied 8-bit head) and the norm / bias vectors.
  size_t weight_bytes() const;
  // Bytes of the weight matrices alone (the head included, the embedding table not): what one generated token
  // of an autoregressive model reads.
  size_t matrix_bytes() const;
  // Matrices held in 8 bits, of all matrices (the head included).
  int64_t q8_matrices() const;
  // Matrices of GGUF Q8_0 / Q4_0 blocks repacked into 16-row panels (quant::LinearPacked).
  int64_t packed_matrices() const;
  // Experts packed so far on their first use (MoeWeights::PackedOnUse), counted as matrices (3 an expert).
  int64_t packed_on_use_matrices() const;
  // Matrices multiplied in place from GGUF blocks (quant::LinearGgml), and the block type of the first
  // matrix held as GGUF blocks, in place or packed ("Q4_K", ...).
  int64_t ggml_matrices() const;
  std::string ggml_type_name() const;
  int64_t matrices() const;
  const TransformerConfig& config() const { return config_; }

  // What the mixture-of-experts layers did since reset (for `dllm bench`): expert matmuls run (one per chosen
  // (layer, expert) pair and forward), the bytes of those experts' weights, the multiply-adds x2 on them, and
  // the time in the routed experts (gather, three matmuls, weighted scatter) when KernelProfile is on.
  struct MoeStats {
    int64_t experts_run = 0;
    double expert_bytes = 0, expert_flops = 0, expert_seconds = 0;
  };
  const MoeStats& moe_stats() const { return moe_stats_; }
  void reset_moe_stats() { moe_stats_ = {}; }

  // Time and weight bytes of the matmuls by their place in the layer, while KernelProfile is on (for `dllm
  // bench --ar`'s report of which matrices stream slowest): q/k/v, o, gate/up, down, head. Dense layers only
  // (the experts are MoeStats').
  enum class MatmulRole { kQkv, kOut, kGateUp, kDown, kHead, kCount };
  static const char* matmul_role_name(MatmulRole role);
  struct MatmulRoleStats {
    double seconds[static_cast<int>(MatmulRole::kCount)] = {};
    double bytes[static_cast<int>(MatmulRole::kCount)] = {};
  };
  const MatmulRoleStats& matmul_role_stats() const { return role_stats_; }
  void reset_matmul_role_stats() { role_stats_ = {}; }

  // A generated token's forward (<= 4 rows on the block cache, dense layers, every matrix in packed panels)
  // runs all its layers in one parallel region, the threads meeting at spin barriers between the steps
  // (run_token). On by default; off runs it as any forward does, one region per step (for tests and A/B
  // timing). The same bits either way.
  void set_token_in_one_region(bool on) { token_in_one_region_ = on; }
  int64_t forwards_in_one_region() const { return forwards_in_one_region_; }  // since load

  // Where the forward runs: the CPU backend from construction; another backend gets its own copy of every
  // weight here, once (a model larger than its device's memory is an error before anything is copied).
  void set_backend(std::unique_ptr<Backend> backend);
  const Backend& backend() const { return *backend_; }

 private:
  // The logits of the input's rows, or (stats given) their LogitStats, reduced by the backend, and no logits.
  std::vector<float> run(const ForwardInput& input, std::vector<LogitStats>* stats);
  void embed(std::span<const int32_t> tokens, float* out) const;
  // x += ffn(h) over n rows: the dense MLP or the routed experts.
  void feed_forward(const LayerWeights& w, int64_t n, const Tensor& x, const Tensor& h);
  void mixture_of_experts(const MoeWeights& w, int64_t n, const Tensor& x, const Tensor& h);
  // Whether every layer is dense and every matrix packed so that run_token can take a token's forward.
  bool token_in_one_region_possible() const;
  // The layers, final norm and head of n <= 4 rows extending the block cache (x_ holds their embeddings),
  // in one parallel region: each matmul split into the threads' contiguous shares, attention by heads, the
  // small steps on one thread; a spin barrier after each step. Returns the logits of rows [keep_from,
  // keep_to).
  struct TokenScratch {  // the CPU backend's activations, by host address
    float *x, *h, *q, *k, *v, *att, *gate, *up;
  };
  std::vector<float> run_token(const TokenScratch& s, int64_t n, const int64_t* positions, KvCache& cache,
                               int64_t offset, int64_t cache_append, int64_t block, int64_t keep_from,
                               int64_t keep_to);

  TransformerConfig config_;
  std::unique_ptr<Checkpoint> checkpoint_;  // keeps the mapped embedding alive
  TransformerWeights weights_;
  RopeTable rope_;
  std::mutex mutex_;  // one forward at a time; the backend's activations are reused across calls
  std::unique_ptr<Backend> backend_;
  std::vector<float> router_;  // a mixture-of-experts layer's router logits, on the host for the choice
  MoeStats moe_stats_;
  MatmulRoleStats role_stats_;
  // y (+)= x · wᵀ over n rows, and ys[i] = x · ws[i]ᵀ as one group (MatMul::forward_group); while
  // KernelProfile is on, their time and weight bytes count under `role`.
  void multiply(MatmulRole role, const MatMul& w, const Tensor& x, const Tensor& y, bool accumulate);
  void multiply_group(MatmulRole role, std::initializer_list<const MatMul*> ws, const Tensor& x,
                      std::initializer_list<Tensor> ys);
  template <class F>
  void timed(MatmulRole role, std::span<const MatMul* const> ws, F&& f);
  std::thread preparer_;
  std::atomic<bool> stop_preparing_{false};
  size_t bytes_to_prepare_ = 0;
  std::atomic<size_t> bytes_prepared_{0};
  bool token_in_one_region_ = true;
  int64_t forwards_in_one_region_ = 0;
  mutable std::atomic<bool> token_in_one_region_possible_{false};
};

}  // namespace dllm
