#include "model/family.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "io/json_file.h"

namespace dllm {

bool is_per_layer(TensorRole role) {
  return role != TensorRole::kEmbedding && role != TensorRole::kOutputNorm && role != TensorRole::kHead;
}

bool is_expert(TensorRole role) {
  return role == TensorRole::kExpertGate || role == TensorRole::kExpertUp || role == TensorRole::kExpertDown;
}

bool is_matrix(TensorRole role) {
  switch (role) {
    case TensorRole::kQKV:
    case TensorRole::kRouter:
    case TensorRole::kExpertGate:
    case TensorRole::kExpertUp:
    case TensorRole::kExpertDown:
    case TensorRole::kSharedGate:
    case TensorRole::kSharedUp:
    case TensorRole::kSharedDown:
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
    case TensorRole::kQKV:
      return {q_dim + 2 * kv_dim, d};
    case TensorRole::kQNorm:
    case TensorRole::kKNorm:
      return {m.head_dim};
    case TensorRole::kRouter:
      return {config.moe.experts, d};
    case TensorRole::kExpertBias:
      return {config.moe.experts};
    case TensorRole::kExpertGate:
    case TensorRole::kExpertUp:
      return {config.moe.expert_ffn, d};
    case TensorRole::kExpertDown:
      return {d, config.moe.expert_ffn};
    case TensorRole::kSharedGate:
    case TensorRole::kSharedUp:
      return {config.moe.shared * config.moe.expert_ffn, d};
    case TensorRole::kSharedDown:
      return {d, config.moe.shared * config.moe.expert_ffn};
  }
  fail("tensor_shape: unknown role");
}

bool tensor_present(const TensorSpec& spec, const TransformerConfig& config, int64_t layer) {
  const bool moe = layer >= 0 && config.is_moe_layer(layer);
  switch (spec.role) {
    case TensorRole::kHead:
      return !config.tied_head;
    case TensorRole::kQBias:
    case TensorRole::kKBias:
    case TensorRole::kVBias:
      return config.qkv_bias;
    case TensorRole::kQNorm:
    case TensorRole::kKNorm:
      return config.qk_norm;
    case TensorRole::kGate:
    case TensorRole::kUp:
    case TensorRole::kDown:
      return !moe;
    case TensorRole::kRouter:
    case TensorRole::kExpertGate:
    case TensorRole::kExpertUp:
    case TensorRole::kExpertDown:
      return moe;
    case TensorRole::kExpertBias:
      return moe && config.moe.expert_bias;
    case TensorRole::kSharedGate:
    case TensorRole::kSharedUp:
    case TensorRole::kSharedDown:
      return moe && config.moe.shared > 0;
    default:
      return true;
  }
}

std::string tensor_name(const std::string& pattern, int64_t layer, int64_t expert) {
  std::string name = pattern;
  if (const size_t at = name.find("{}"); at != std::string::npos)
    name = name.substr(0, at) + std::to_string(layer) + name.substr(at + 2);
  if (const size_t at = name.find("{e}"); at != std::string::npos)
    name = name.substr(0, at) + std::to_string(expert) + name.substr(at + 3);
  return name;
}

int64_t rope_pair_heads(const TensorSpec& spec, const TransformerConfig& config) {
  if (spec.gguf_transform != GgufTransform::kRopePairRows) return 0;
  return spec.role == TensorRole::kQ ? config.info.n_heads : config.info.n_kv_heads;
}

void permute_rope_rows_into(const uint8_t* rows, size_t row_bytes, int64_t n_rows, int64_t heads,
                            bool to_gguf, const std::string& what, uint8_t* out) {
  if (heads <= 0 || n_rows % heads != 0 || (n_rows / heads) % 2 != 0)
    fail(what, ": ", n_rows, " rows do not split into ", heads, " heads of even size");
  const int64_t hd = n_rows / heads, half = hd / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < half; ++j)
      for (int64_t t = 0; t < 2; ++t) {
        const int64_t hf = h * hd + t * half + j, gguf = h * hd + 2 * j + t;
        const int64_t from = to_gguf ? hf : gguf, to = to_gguf ? gguf : hf;
        std::memcpy(out + to * row_bytes, rows + from * row_bytes, row_bytes);
      }
}

std::vector<uint8_t> permute_rope_rows(const uint8_t* rows, size_t row_bytes, int64_t n_rows, int64_t heads,
                                       bool to_gguf, const std::string& what) {
  std::vector<uint8_t> out(static_cast<size_t>(n_rows) * row_bytes);
  permute_rope_rows_into(rows, row_bytes, n_rows, heads, to_gguf, what, out.data());
  return out;
}

LayerWeights make_layer(const TransformerConfig& config, int64_t layer) {
  LayerWeights L;
  if (config.is_moe_layer(layer)) {
    L.moe = std::make_unique<MoeWeights>();
    const auto experts = static_cast<size_t>(config.moe.experts);
    L.moe->gate.resize(experts);
    L.moe->up.resize(experts);
    L.moe->down.resize(experts);
  }
  return L;
}

std::vector<MatMul>* layer_experts(LayerWeights& L, TensorRole role) {
  if (!L.moe) return nullptr;
  switch (role) {
    case TensorRole::kExpertGate:
      return &L.moe->gate;
    case TensorRole::kExpertUp:
      return &L.moe->up;
    case TensorRole::kExpertDown:
      return &L.moe->down;
    default:
      return nullptr;
  }
}

std::array<RowRange, 3> split_qkv_rows(const TransformerConfig& config) {
  const ModelInfo& m = config.info;
  const int64_t q = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim;
  return {RowRange{0, q}, RowRange{q, kv}, RowRange{q + kv, kv}};
}

MatMul* layer_matrix(LayerWeights& L, TensorRole role) {
  if (L.moe) {
    switch (role) {
      case TensorRole::kRouter:
        return &L.moe->router;
      case TensorRole::kSharedGate:
        return &L.moe->shared_gate;
      case TensorRole::kSharedUp:
        return &L.moe->shared_up;
      case TensorRole::kSharedDown:
        return &L.moe->shared_down;
      default:
        break;
    }
  }
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
    case TensorRole::kQNorm:
      return &L.q_norm;
    case TensorRole::kKNorm:
      return &L.k_norm;
    case TensorRole::kExpertBias:
      return L.moe ? &L.moe->expert_bias : nullptr;
    default:
      return nullptr;
  }
}

int64_t count_params(const Family& family, const TransformerConfig& config) {
  int64_t n = 0;
  for (const TensorSpec& spec : family.tensors) {
    int64_t numel = is_expert(spec.role) ? config.moe.experts : 1;
    for (int64_t s : tensor_shape(spec.role, config)) numel *= s;
    if (!is_per_layer(spec.role)) {
      n += tensor_present(spec, config) ? numel : 0;
      continue;
    }
    for (int64_t layer = 0; layer < config.info.n_layers; ++layer)
      n += tensor_present(spec, config, layer) ? numel : 0;
  }
  return n;
}

void read_standard_sizes(const ConfigReader& r, TransformerConfig& c, const char* ffn_key) {
  ModelInfo& m = c.info;
  m.d_model = r.positive_int("hidden_size");
  m.n_layers = r.positive_int("num_hidden_layers");
  m.n_heads = r.positive_int("num_attention_heads");
  m.n_kv_heads = r.optional_int("num_key_value_heads").value_or(m.n_heads);
  if (m.n_kv_heads <= 0 || m.n_heads % m.n_kv_heads != 0)
    r.fail_field("num_key_value_heads",
                 "= " + std::to_string(m.n_kv_heads) +
                     " must divide num_attention_heads = " + std::to_string(m.n_heads));
  if (auto hd = r.optional_int("head_dim")) {
    m.head_dim = *hd;
  } else {
    if (m.d_model % m.n_heads != 0)
      r.fail_field("num_attention_heads", "= " + std::to_string(m.n_heads) +
                                              " must divide hidden_size = " + std::to_string(m.d_model));
    m.head_dim = m.d_model / m.n_heads;
  }
  if (m.head_dim <= 0 || m.head_dim % 2 != 0)
    r.fail_field("head_dim", "= " + std::to_string(m.head_dim) + " must be even and > 0 for RoPE");
  if (ffn_key) m.ffn_hidden = r.positive_int(ffn_key);
  m.vocab_size = r.positive_int("vocab_size");
  m.max_seq_len = r.optional_int("max_position_embeddings").value_or(32768);
  if (m.max_seq_len <= 0) r.fail_field("max_position_embeddings", "must be > 0");
}

void reject_unsupported_hf_settings(const ConfigReader& r, const nlohmann::json& cfg,
                                    const std::string& family, const std::string& attention) {
  if (auto act = r.optional_string("hidden_act"); act && *act != "silu")
    r.fail_field("hidden_act",
                 "= \"" + *act + "\" is not supported (" + family + " checkpoints use \"silu\")");
  if (r.optional_bool("use_sliding_window").value_or(false))
    r.fail_field("use_sliding_window", "= true is not supported (" + attention + " only)");
  if (cfg.contains("rope_scaling") && !cfg["rope_scaling"].is_null())
    r.fail_field("rope_scaling", "= " + cfg["rope_scaling"].dump() + " is not supported (only plain RoPE)");
}

void check_special_ids_in_vocab(const ConfigReader& r, const ModelInfo& m) {
  for (auto [name, id] : {std::pair{"mask_token_id", m.mask_id},
                          {"eos_token_id", m.eos_id},
                          {"pad_token_id", m.pad_id},
                          {"bos_token_id", m.bos_id}})
    if (id >= m.vocab_size)
      r.fail_field(
          name, "= " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(m.vocab_size));
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

TransformerConfig parse_causal_lm_config(const Checkpoint& ckpt, const std::string& architecture,
                                         double default_eps, const std::vector<std::string>& eog_texts) {
  const auto& cfg = ckpt.config();
  ConfigReader r(cfg, ckpt.dir() + "/config.json");
  ConfigReader g(ckpt.generation_config(), ckpt.dir() + "/generation_config.json");
  TransformerConfig c;
  ModelInfo& m = c.info;
  m.path = ckpt.dir();
  m.architecture = architecture;
  m.autoregressive = true;
  read_standard_sizes(r, c);
  read_rope_theta_and_rms_eps(r, default_eps, c);
  auto id = [&](const char* key) {
    return static_cast<int32_t>(r.optional_token_id(key).value_or(g.optional_token_id(key).value_or(-1)));
  };
  m.bos_id = id("bos_token_id");
  m.eos_id = id("eos_token_id");
  m.pad_id = id("pad_token_id");
  m.mask_id = -1;
  check_special_ids_in_vocab(r, m);
  auto add_eog = [&](int64_t v) {
    if (v < 0 || v >= m.vocab_size) return;
    if (std::find(m.eog_ids.begin(), m.eog_ids.end(), v) == m.eog_ids.end())
      m.eog_ids.push_back(static_cast<int32_t>(v));
  };
  add_eog(m.eos_id);
  for (const auto* json : {&cfg, &ckpt.generation_config()})
    if (json->contains("eos_token_id") && (*json)["eos_token_id"].is_array())
      for (const auto& v : (*json)["eos_token_id"])
        if (v.is_number_integer()) add_eog(v.get<int64_t>());
  for (const auto& text : eog_texts)
    if (auto added = find_added_token(ckpt.dir(), {text})) {
      if (m.eot_id < 0 && *added >= 0 && *added < m.vocab_size) m.eot_id = static_cast<int32_t>(*added);
      add_eog(*added);
    }
  c.tied_head = r.optional_bool("tie_word_embeddings").value_or(false);
  return c;
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
