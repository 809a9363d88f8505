// The bidirectional pre-norm transformer that LLaDA, Dream and their relatives share:
//   x = embed(tokens)
//   per layer: x += o(attn(rope(q(norm(x))), rope(k(norm(x))), v(norm(x))));  x += down(silu(gate(h)) * up(h))
//   logits = head(norm(x))
// A family description (model/family.h, model/families/) maps its config.json and tensor names onto this.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

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
};

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // (d_model)
  // Each matrix is an f32/bf16 Linear or 8-bit Q8_0 weights (MatMul); the loaders assign either.
  MatMul q, k, v;                          // (n_heads*hd, d), (n_kv_heads*hd, d), (n_kv_heads*hd, d)
  std::vector<float> q_bias, k_bias, v_bias;  // empty when the family has no qkv bias
  MatMul o;                                   // (d, n_heads*hd)
  MatMul gate, up;                            // (ffn_hidden, d)
  MatMul down;                                // (d, ffn_hidden)
};

struct TransformerWeights {
  const TensorView* embedding = nullptr;  // (vocab, d), used in place from the mapped file
  // Set instead when the weights do not come from a file (random models for benchmarks).
  std::shared_ptr<TensorView> owned_embedding;
  std::shared_ptr<std::vector<uint8_t>> owned_embedding_data;
  // Set instead of `embedding` when the table is kept in 8 bits (a Q8_0 token_embd loaded as kQ8); rows are
  // dequantised on lookup. When the head is tied it is the same object as head.q8().
  std::shared_ptr<const quant::LinearQ8> embedding_q8;
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // (d)
  MatMul head;                    // (vocab, d)
};

class Transformer final : public Model {
 public:
  Transformer(TransformerConfig config, std::unique_ptr<Checkpoint> checkpoint, TransformerWeights weights);
  const ModelInfo& info() const override { return config_.info; }
  Expected<std::vector<float>> forward(const ForwardInput& input) override;
  // Bytes of the weights as held at run time: matrices (f32 / bf16 / 8-bit), the embedding table (mapped or
  // owned; counted once when it is the tied 8-bit head) and the norm / bias vectors.
  size_t weight_bytes() const;
  // Matrices held in 8 bits, of all matrices (the head included).
  int64_t q8_matrices() const;
  int64_t matrices() const;

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

}  // namespace dllm
