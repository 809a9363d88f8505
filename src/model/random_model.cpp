#include "model/random_model.h"

#include <cstring>
#include <random>

#include "core/error.h"
#include "kernels/linear.h"
#include "model/family.h"
#include "model/precision.h"

namespace dllm {

const std::vector<ModelShape>& known_shapes() {
  static const std::vector<ModelShape> kShapes = {
      {"llada-8b", "llada", 4096, 32, 32, 32, 12288, 126464},
      {"dream-7b", "dream", 3584, 28, 28, 4, 18944, 152064},
      {"llada-1b", "llada", 2048, 16, 16, 16, 5632, 126464},
      {"llada-tiny", "llada", 128, 3, 4, 4, 384, 512},
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

// Uniform with the given standard deviation: billions of values for 8B shapes, so a cheap generator
// (xorshift).
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

}  // namespace

std::shared_ptr<Model> make_random_model(const ModelShape& shape, int64_t n_layers, Precision precision,
                                         uint64_t seed) {
  const Family* family = find_family(shape.family);
  if (!family) fail("model shape '", shape.name, "': unknown family '", shape.family, "'");
  TransformerConfig c;
  ModelInfo& m = c.info;
  m.path = "random:" + shape.name;
  m.architecture = family->name;
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
  m.shift_logits = family->shift_logits;
  const ComputeType ct = precision == Precision::kF32 ? ComputeType::kF32 : ComputeType::kBF16;
  m.precision = precision == Precision::kF32 ? Precision::kF32 : Precision::kBF16;
  m.precision_reason = precision == Precision::kAuto
                           ? "auto: random weights held as bf16, as a real checkpoint"
                           : std::string("requested (--dtype ") + precision_name(precision) + ")";
  for (const TensorSpec& spec : family->tensors) c.qkv_bias |= spec.role == TensorRole::kQBias;
  c.rope_theta = 500000.0f;

  std::mt19937_64 rng(seed);
  TransformerWeights w;
  auto random_tensor = [&](TensorRole role) {
    int64_t n = 1;
    for (int64_t s : tensor_shape(role, c)) n *= s;
    return random_vector(rng, static_cast<size_t>(n), 0.02f);
  };
  auto emb = random_tensor(TensorRole::kEmbedding);
  w.owned_embedding_data = std::make_shared<std::vector<uint8_t>>(emb.size() * 4);
  std::memcpy(w.owned_embedding_data->data(), emb.data(), emb.size() * 4);
  w.owned_embedding = std::make_shared<TensorView>();
  w.owned_embedding->name = "embedding";
  w.owned_embedding->dtype = DType::kF32;
  w.owned_embedding->shape = {m.vocab_size, m.d_model};
  w.owned_embedding->data = w.owned_embedding_data->data();
  w.owned_embedding->nbytes = w.owned_embedding_data->size();
  w.embedding = w.owned_embedding.get();
  w.layers.resize(static_cast<size_t>(m.n_layers));
  for (auto& L : w.layers)
    for (const TensorSpec& spec : family->tensors) {
      if (!is_per_layer(spec.role) || !tensor_present(spec, c)) continue;
      const auto shape = tensor_shape(spec.role, c);
      if (MatMul* mat = layer_matrix(L, spec.role)) {
        const auto v = random_tensor(spec.role);
        *mat = Linear(v.data(), DType::kF32, shape[0], shape[1], ct);
      } else if (spec.role == TensorRole::kAttnNorm || spec.role == TensorRole::kFfnNorm) {
        layer_vector(L, spec.role)->assign(static_cast<size_t>(shape[0]), 1.0f);
      } else {
        *layer_vector(L, spec.role) = random_tensor(spec.role);
      }
    }
  w.final_norm.assign(static_cast<size_t>(m.d_model), 1.0f);
  const auto head = random_tensor(TensorRole::kHead);
  w.head = Linear(head.data(), DType::kF32, m.vocab_size, m.d_model, ct);
  m.n_params = count_params(*family, c);
  return std::make_shared<Transformer>(std::move(c), nullptr, std::move(w));
}

}  // namespace dllm
