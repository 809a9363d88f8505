#include "model/family.h"

#include <cstring>
#include <limits>

#include "core/error.h"
#include "io/json_file.h"

namespace dllm {

bool is_per_layer(TensorRole role) {
  return role != TensorRole::kEmbedding && role != TensorRole::kOutputNorm && role != TensorRole::kHead;
}

bool is_matrix(TensorRole role) {
  switch (role) {
    case TensorRole::kEmbedding:
    case TensorRole::kHead:
    case TensorRole::kQ:
    case TensorRole::kK:
    case TensorRole::kV:
    case TensorRole::kAttnOut:
    case TensorRole::kGate:
    case TensorRole::kUp:
    case TensorRole::kDown:
      return true;
    default:
      return false;
  }
}

const TensorSpec& find_spec(const Family& family, TensorRole role) {
  for (const TensorSpec& spec : family.tensors)
    if (spec.role == role) return spec;
  fail("family ", family.name, ": its tensor table has no entry for role ", static_cast<int>(role));
}

std::vector<int64_t> tensor_shape(TensorRole role, const TransformerConfig& config) {
  const ModelInfo& m = config.info;
  const int64_t d = m.d_model, q_dim = m.n_heads * m.head_dim, kv_dim = m.n_kv_heads * m.head_dim;
  switch (role) {
    case TensorRole::kEmbedding:
    case TensorRole::kHead:
      return {m.vocab_size, d};
    case TensorRole::kOutputNorm:
    case TensorRole::kAttnNorm:
    case TensorRole::kFfnNorm:
      return {d};
    case TensorRole::kQ:
      return {q_dim, d};
    case TensorRole::kK:
    case TensorRole::kV:
      return {kv_dim, d};
    case TensorRole::kQBias:
      return {q_dim};
    case TensorRole::kKBias:
    case TensorRole::kVBias:
      return {kv_dim};
    case TensorRole::kAttnOut:
      return {d, q_dim};
    case TensorRole::kGate:
    case TensorRole::kUp:
      return {m.ffn_hidden, d};
    case TensorRole::kDown:
      return {d, m.ffn_hidden};
  }
  fail("tensor_shape: unknown role");
}

bool tensor_present(const TensorSpec& spec, const TransformerConfig& config) {
  switch (spec.role) {
    case TensorRole::kHead:
      return !config.tied_head;
    case TensorRole::kQBias:
    case TensorRole::kKBias:
    case TensorRole::kVBias:
      return config.qkv_bias;
    default:
      return true;
  }
}

std::string tensor_name(const std::string& pattern, int64_t layer) {
  const size_t at = pattern.find("{}");
  if (at == std::string::npos) return pattern;
  return pattern.substr(0, at) + std::to_string(layer) + pattern.substr(at + 2);
}

int64_t rope_pair_heads(const TensorSpec& spec, const TransformerConfig& config) {
  if (spec.gguf_transform != GgufTransform::kRopePairRows) return 0;
  return spec.role == TensorRole::kQ ? config.info.n_heads : config.info.n_kv_heads;
}

std::vector<uint8_t> permute_rope_rows(const uint8_t* rows, size_t row_bytes, int64_t n_rows, int64_t heads,
                                       bool to_gguf, const std::string& what) {
  if (heads <= 0 || n_rows % heads != 0 || (n_rows / heads) % 2 != 0)
    fail(what, ": ", n_rows, " rows do not split into ", heads, " heads of even size");
  const int64_t hd = n_rows / heads, half = hd / 2;
  std::vector<uint8_t> out(static_cast<size_t>(n_rows) * row_bytes);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < half; ++j)
      for (int64_t t = 0; t < 2; ++t) {
        const int64_t hf = h * hd + t * half + j, gguf = h * hd + 2 * j + t;
        const int64_t from = to_gguf ? hf : gguf, to = to_gguf ? gguf : hf;
        std::memcpy(out.data() + to * row_bytes, rows + from * row_bytes, row_bytes);
      }
  return out;
}

MatMul* layer_matrix(LayerWeights& L, TensorRole role) {
  switch (role) {
    case TensorRole::kQ:
      return &L.q;
    case TensorRole::kK:
      return &L.k;
    case TensorRole::kV:
      return &L.v;
    case TensorRole::kAttnOut:
      return &L.o;
    case TensorRole::kGate:
      return &L.gate;
    case TensorRole::kUp:
      return &L.up;
    case TensorRole::kDown:
      return &L.down;
    default:
      return nullptr;
  }
}

std::vector<float>* layer_vector(LayerWeights& L, TensorRole role) {
  switch (role) {
    case TensorRole::kAttnNorm:
      return &L.attn_norm;
    case TensorRole::kFfnNorm:
      return &L.ffn_norm;
    case TensorRole::kQBias:
      return &L.q_bias;
    case TensorRole::kKBias:
      return &L.k_bias;
    case TensorRole::kVBias:
      return &L.v_bias;
    default:
      return nullptr;
  }
}

int64_t count_params(const Family& family, const TransformerConfig& config) {
  int64_t n = 0;
  for (const TensorSpec& spec : family.tensors) {
    if (!tensor_present(spec, config)) continue;
    int64_t numel = 1;
    for (int64_t s : tensor_shape(spec.role, config)) numel *= s;
    n += is_per_layer(spec.role) ? numel * config.info.n_layers : numel;
  }
  return n;
}

void read_rope_theta_and_rms_eps(const ConfigReader& r, double default_eps, TransformerConfig& c) {
  const double rope_theta = r.optional_number("rope_theta").value_or(10000.0);
  const double rms_eps = r.optional_number("rms_norm_eps").value_or(default_eps);
  if (!(rope_theta > 0) || !(rope_theta <= std::numeric_limits<float>::max()))
    r.fail_field("rope_theta", "must be > 0 and finite in float32, got " + std::to_string(rope_theta));
  if (!(rms_eps > 0) || !(rms_eps <= 1))
    r.fail_field("rms_norm_eps", "must be in (0, 1], got " + std::to_string(rms_eps));
  c.rope_theta = static_cast<float>(rope_theta);
  c.rms_eps = static_cast<float>(rms_eps);
}

std::optional<int64_t> find_added_token(const std::string& model_dir,
                                        const std::vector<std::string>& contents) {
  const std::string path = model_dir + "/tokenizer.json";
  if (!file_exists(path)) return std::nullopt;
  const auto tok = read_json_file(path);
  if (!tok.is_object() || !tok.contains("added_tokens") || !tok["added_tokens"].is_array())
    return std::nullopt;
  for (const auto& want : contents)
    for (const auto& t : tok["added_tokens"])
      if (t.is_object() && t.value("content", "") == want && t.contains("id") && t["id"].is_number_integer())
        return t["id"].get<int64_t>();
  return std::nullopt;
}

}  // namespace dllm
