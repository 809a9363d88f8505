// DiffusionGemma (`DiffusionGemmaForBlockDiffusion`, model_type diffusion_gemma): a Gemma 4 text stack run
// twice with one set of weights, as a causal encoder over the prompt and the committed canvases (its keys and
// values kept per row) and as a bidirectional decoder over a canvas that reads that cache without writing it.
// Per layer:
//   h   = x + post_attn_norm(attn(input_norm(x)))
//   out = (h + post_ffn_norm(post_ffn_norm_1(mlp(pre_ffn_norm(h))) +
//   post_ffn_norm_2(experts(pre_ffn_norm_2(h)))))
//         * layer_scalar (one per stack)
// with sliding-window layers (their own kv heads and head dim, default RoPE, the last W-1 keys cached) and
// full layers (global head dim, K = V taken before k_norm, "proportional" partial RoPE), attention unscaled,
// GELU (tanh) MLPs, a routed mixture of experts beside the dense MLP in every layer, self-conditioning on the
// previous step's logits into the decoder's input, and softcapped logits. The reference's quirks and their
// line numbers: tests/data/dgemma/README.md §6, docs/diffusion-gemma.md.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "dllm/dllm.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/transformer.h"

namespace dllm {

struct DiffusionGemmaConfig {
  ModelInfo info;  // d_model, n_layers, n_heads, head_dim (sliding), ffn_hidden, vocab, experts, special ids
  int64_t canvas_length = 0;
  int64_t sliding_window = 0;
  float rms_eps = 1e-6f;
  float softcap = 30.0f;  // final_logit_softcapping
  int64_t expert_ffn = 0;
  struct Attention {  // one per layer type
    int64_t kv_heads = 0, head_dim = 0;
    float rope_theta = 10000.0f;
    double partial_rotary_factor = 1.0;  // "proportional" RoPE: the share of frequencies that rotate
  } sliding, full;
  std::vector<bool> layer_sliding;  // per layer
  UniformStateParams generation;    // generation_config.json, every field set
  // The encoder / decoder layer_scalar of each layer are separate buffers (equal in released checkpoints).
};

// config.json (+ generation_config.json) -> the config; throws naming the file and field for what is missing
// or not run (use_bidirectional_attention "all", another activation, attention bias).
DiffusionGemmaConfig parse_diffusion_gemma_config(const Checkpoint& ckpt);
// Whether a checkpoint's config.json names this family.
bool is_diffusion_gemma(const nlohmann::json& config);
// generation_config.json-style keys (the reference's generate() names; entropy_bound also nested under
// sampler_config) over `params`; unknown keys are ignored, a known key of the wrong type is an error naming
// `file` and the key.
void read_uniform_state_params(const nlohmann::json& j, const std::string& file, UniformStateParams& params);

struct DiffusionGemmaLayer {
  bool sliding = true;
  int64_t kv_heads = 0, head_dim = 0;
  MatMul q, k, v, o;  // v absent on full layers (K = V)
  std::vector<float> q_norm, k_norm;
  MatMul gate, up, down;  // the dense MLP
  std::vector<float> input_norm, post_attn_norm, pre_ffn_norm, post_ffn_norm, post_ffn_norm_1,
      post_ffn_norm_2, pre_ffn_norm_2;
  MatMul router;  // (experts, d), f32
  std::vector<float> router_scale, per_expert_scale;
  // The routed experts' gate / up (ffn, d) and down (d, ffn), per expert; from a GGUF file's blocks they are
  // packed into panels on first use (MoeWeights::PackedOnUse). Its router is `router` above.
  MoeWeights experts;
  float scalar[2] = {1, 1};  // encoder, decoder
};

struct DiffusionGemmaWeights {
  // The embedding table (vocab, d), also the tied head: plain values where they lie (a safetensors shard, a
  // plain GGUF tensor), or GGUF blocks whose rows are dequantised on lookup.
  const uint8_t* embedding = nullptr;
  DType embedding_dtype = DType::kF32;
  std::optional<MatMul> embedding_blocks;
  std::shared_ptr<std::vector<float>> embedding_owned;  // a quantized table dequantised at load
  std::vector<DiffusionGemmaLayer> layers;
  std::vector<float> final_norm;
  MatMul head;                     // the embedding table as a matrix
  std::vector<float> sc_pre_norm;  // self_conditioning.pre_norm
  MatMul sc_gate, sc_up, sc_down;  // self_conditioning MLP
};

class DiffusionGemma final : public Model, public CanvasDecoder {
 public:
  // `storage` keeps the mapped files the weights point into alive.
  DiffusionGemma(DiffusionGemmaConfig config, std::shared_ptr<const void> storage,
                 DiffusionGemmaWeights weights, ComputeType compute);
  const ModelInfo& info() const override { return config_.info; }
  Expected<std::vector<float>> forward(const ForwardInput& input) override;  // an error: see canvas_decoder
  CanvasDecoder* canvas_decoder() override { return this; }

  int64_t canvas_length() const override { return config_.canvas_length; }
  const UniformStateParams& generation_defaults() const override { return config_.generation; }
  std::unique_ptr<EncoderCache> new_cache(int64_t batch) const override;
  Expected<std::vector<float>> encode(EncoderCache& cache, std::span<const int32_t> tokens,
                                      bool hidden) override;
  Expected<std::vector<float>> decode(const EncoderCache& cache, std::span<const int32_t> canvas,
                                      std::span<const float> self_conditioning) override;
  const DiffusionGemmaConfig& config() const { return config_; }

  // Where a forward's time goes, for `dllm bench` (while profiling is on): the routed experts (gather, three
  // products, weighted scatter) with the bytes of the expert weights they read, attention (scores and the
  // weighted sum, not the projections), the self-conditioning input (softmax · E and its MLP) and the head.
  struct Profile {
    double expert_seconds = 0, expert_bytes = 0, expert_flops = 0;
    int64_t experts_run = 0;  // (layer, expert) products run
    double attention_seconds = 0, self_conditioning_seconds = 0, head_seconds = 0;
  };
  void set_profiling(bool on) { profiling_ = on; }
  const Profile& profile() const { return profile_; }
  void reset_profile() { profile_ = {}; }
  size_t weight_bytes() const;  // the matrices as held (the embedding table counted once)

 private:
  enum Stack { kEncoder = 0, kDecoder = 1 };
  class Cache;
  // x [batch * n, d] through every layer of `stack`, the rows of each batch row at positions start ..
  // start + n - 1. The encoder appends its keys / values to the cache; the decoder only reads it.
  void run_layers(Stack stack, std::vector<float>& x, int64_t batch, int64_t n, Cache& cache);
  void attention(Stack stack, int64_t layer, const std::vector<float>& normed, int64_t batch, int64_t n,
                 Cache& cache, std::vector<float>& out);
  void mixture_of_experts(const DiffusionGemmaLayer& w, const std::vector<float>& h, int64_t rows,
                          std::vector<float>& out);
  void embed(std::span<const int32_t> tokens, std::vector<float>& x) const;  // E[id] * sqrt(d)

  DiffusionGemmaConfig config_;
  std::shared_ptr<const void> storage_;
  DiffusionGemmaWeights weights_;
  ComputeType compute_;
  RopeTable rope_sliding_, rope_full_;
  float embed_scale_ = 1;
  std::vector<float> ones_;  // the weight of the norms that have none (v_norm, router norm, decoder input)
  bool profiling_ = false;
  Profile profile_;
  std::mutex mutex_;  // one encode / decode at a time: the RoPE tables grow with the longest sequence
};

// From a Hugging Face directory, or a GGUF file written by `dllm convert` (diffusion_gemma_load.cpp).
std::shared_ptr<Model> load_diffusion_gemma(std::unique_ptr<Checkpoint> ckpt, const LoadOptions& options);
std::shared_ptr<Model> load_diffusion_gemma_gguf(std::shared_ptr<GgufFile> file, const LoadOptions& options);

}  // namespace dllm
