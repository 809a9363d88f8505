#include "model/random_model.h"

#include <cstring>
#include <random>

#include "core/error.h"
#include "kernels/linear.h"
#include "model/transformer.h"

namespace dllm {

const std::vector<ModelShape>& known_shapes() {
  static const std::vector<ModelShape> kShapes = {
      {"llada-8b", 4096, 32, 32, 32, 12288, 126464, false},
      {"dream-7b", 3584, 28, 28, 4, 18944, 152064, true},
      {"llada-1b", 2048, 16, 16, 16, 5632, 126464, false},
      {"llada-tiny", 128, 3, 4, 4, 384, 512, false},
  };
  return kShapes;
}

const ModelShape& find_shape(const std::string& name) {
  std::string known;
  for (const auto& s : known_shapes()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  fail("unknown model shape '", name, "' (known: ", known, ")");
}

namespace {

// Uniform with the given standard deviation: billions of values for 8B shapes, so a cheap generator (xorshift).
std::vector<float> random_vector(std::mt19937_64& rng, size_t n, float stddev) {
  uint64_t state = rng() | 1;
  const float scale = stddev * 1.7320508f / 8388608.0f;  // uniform(-a, a) has std a/sqrt(3)
  std::vector<float> v(n);
  for (auto& x : v) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    x = static_cast<float>(static_cast<int32_t>(state >> 40) - 8388608) * scale;
  }
  return v;
}

Linear random_linear(std::mt19937_64& rng, int64_t out, int64_t in, ComputeType ct) {
  auto w = random_vector(rng, static_cast<size_t>(out * in), 0.02f);
  return Linear(w.data(), DType::kF32, out, in, ct);
}

}  // namespace

std::shared_ptr<Model> make_random_model(const ModelShape& shape, int64_t n_layers, ComputeType compute,
                                         uint64_t seed) {
  TransformerConfig c;
  ModelInfo& m = c.info;
  m.path = "random:" + shape.name;
  m.architecture = shape.qkv_bias ? "dream" : "llada";
  m.d_model = shape.d_model;
  m.n_layers = n_layers > 0 ? n_layers : shape.n_layers;
  m.n_heads = shape.n_heads;
  m.n_kv_heads = shape.n_kv_heads;
  m.head_dim = shape.d_model / shape.n_heads;
  m.ffn_hidden = shape.ffn_hidden;
  m.vocab_size = shape.vocab_size;
  m.max_seq_len = 1 << 16;
  m.mask_id = static_cast<int32_t>(shape.vocab_size - 1);
  m.eos_id = m.pad_id = static_cast<int32_t>(shape.vocab_size - 2);
  m.shift_logits = shape.qkv_bias;
  m.compute = compute;
  c.qkv_bias = shape.qkv_bias;
  c.rope_theta = 500000.0f;

  std::mt19937_64 rng(seed);
  const int64_t d = m.d_model, q_dim = m.n_heads * m.head_dim, kv_dim = m.n_kv_heads * m.head_dim;
  TransformerWeights w;
  auto emb = random_vector(rng, static_cast<size_t>(m.vocab_size * d), 0.02f);
  w.owned_embedding_data = std::make_shared<std::vector<uint8_t>>(emb.size() * 4);
  std::memcpy(w.owned_embedding_data->data(), emb.data(), emb.size() * 4);
  w.owned_embedding = std::make_shared<TensorView>();
  w.owned_embedding->name = "embedding";
  w.owned_embedding->dtype = DType::kF32;
  w.owned_embedding->shape = {m.vocab_size, d};
  w.owned_embedding->data = w.owned_embedding_data->data();
  w.owned_embedding->nbytes = w.owned_embedding_data->size();
  w.embedding = w.owned_embedding.get();
  for (int64_t i = 0; i < m.n_layers; ++i) {
    LayerWeights L;
    L.attn_norm.assign(d, 1.0f);
    L.ffn_norm.assign(d, 1.0f);
    L.q = random_linear(rng, q_dim, d, m.compute);
    L.k = random_linear(rng, kv_dim, d, m.compute);
    L.v = random_linear(rng, kv_dim, d, m.compute);
    if (c.qkv_bias) {
      L.q_bias = random_vector(rng, q_dim, 0.02f);
      L.k_bias = random_vector(rng, kv_dim, 0.02f);
      L.v_bias = random_vector(rng, kv_dim, 0.02f);
    }
    L.o = random_linear(rng, d, q_dim, m.compute);
    L.gate = random_linear(rng, m.ffn_hidden, d, m.compute);
    L.up = random_linear(rng, m.ffn_hidden, d, m.compute);
    L.down = random_linear(rng, d, m.ffn_hidden, m.compute);
    w.layers.push_back(std::move(L));
  }
  w.final_norm.assign(d, 1.0f);
  w.head = random_linear(rng, m.vocab_size, d, m.compute);
  m.n_params = 2 * m.vocab_size * d + m.n_layers * (d * (q_dim + 2 * kv_dim) + q_dim * d + 3 * d * m.ffn_hidden);
  return std::make_shared<Transformer>(std::move(c), nullptr, std::move(w));
}

}  // namespace dllm
