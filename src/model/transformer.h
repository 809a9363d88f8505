// The bidirectional pre-norm transformer that LLaDA, Dream and their relatives share:
//   x = embed(tokens)
//   per layer: x += o(attn(rope(q(norm(x))), rope(k(norm(x))), v(norm(x))));  x += down(silu(gate(h)) * up(h))
//   logits = head(norm(x))
// An architecture file (llada.cpp, dream.cpp) maps its config.json and tensor names onto this.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "dllm/dllm.h"
#include "io/checkpoint.h"
#include "kernels/linear.h"
#include "kernels/ops.h"

namespace dllm {

struct TransformerConfig {
  ModelInfo info;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool qkv_bias = false;
};

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // (d_model)
  Linear q, k, v;                          // (n_heads*hd, d), (n_kv_heads*hd, d), (n_kv_heads*hd, d)
  std::vector<float> q_bias, k_bias, v_bias;  // empty when the family has no qkv bias
  Linear o;                                   // (d, n_heads*hd)
  Linear gate, up;                            // (ffn_hidden, d)
  Linear down;                                // (d, ffn_hidden)
};

struct TransformerWeights {
  const TensorView* embedding = nullptr;  // (vocab, d), used in place from the mapped file
  // Set instead when the weights do not come from a file (random models for benchmarks).
  std::shared_ptr<TensorView> owned_embedding;
  std::shared_ptr<std::vector<uint8_t>> owned_embedding_data;
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // (d)
  Linear head;                    // (vocab, d)
};

class Transformer final : public Model {
 public:
  Transformer(TransformerConfig config, std::unique_ptr<Checkpoint> checkpoint, TransformerWeights weights);
  const ModelInfo& info() const override { return config_.info; }
  Expected<std::vector<float>> forward(const ForwardInput& input) override;

 private:
  std::vector<float> run(const ForwardInput& input);
  void embed(std::span<const int32_t> tokens, float* out) const;

  TransformerConfig config_;
  std::unique_ptr<Checkpoint> checkpoint_;  // keeps the mapped embedding alive
  TransformerWeights weights_;
  RopeTable rope_;
  std::mutex mutex_;  // one forward at a time; the scratch buffers below are reused across calls
  std::vector<float> x_, h_, q_, k_, v_, att_, gate_, up_;
};

// Helpers the architecture files use to read weights (convert / check shapes, name the tensor on error).
std::vector<float> load_vector(Checkpoint& ckpt, const std::string& name, int64_t size);
Linear load_linear(Checkpoint& ckpt, const std::string& name, int64_t out_features, int64_t in_features,
                   ComputeType compute);

}  // namespace dllm
