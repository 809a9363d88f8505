// DiffusionGemma's config.json and generation_config.json (the reference's configuration_diffusion_gemma.py:
// C:line in tests/data/dgemma/README.md).
#include <cmath>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/diffusion_gemma.h"

namespace dllm {

namespace {

std::vector<int32_t> token_list(const nlohmann::json& v, const std::string& file, const std::string& key) {
  std::vector<int32_t> ids;
  if (v.is_number_integer()) {
    ids.push_back(v.get<int32_t>());
  } else if (v.is_array()) {
    for (const auto& e : v) {
      if (!e.is_number_integer())
        fail(file, ": field '", key, "' must hold integer token ids, got ", v.dump());
      ids.push_back(e.get<int32_t>());
    }
  } else {
    fail(file, ": field '", key, "' must be a token id or a list of them, got ", v.dump());
  }
  return ids;
}

// rope_parameters[layer_type]: theta and, for "proportional", the rotating share.
DiffusionGemmaConfig::Attention read_rope(const nlohmann::json& rope, const std::string& file,
                                          const std::string& type, DiffusionGemmaConfig::Attention a) {
  if (!rope.contains(type)) return a;
  const ConfigReader r(rope[type], file + " text_config.rope_parameters." + type);
  if (auto theta = r.optional_number("rope_theta")) a.rope_theta = static_cast<float>(*theta);
  const std::string kind = r.optional_string("rope_type").value_or("default");
  if (kind == "proportional") {
    a.partial_rotary_factor = r.optional_number("partial_rotary_factor").value_or(1.0);
    if (!(a.partial_rotary_factor > 0 && a.partial_rotary_factor <= 1))
      r.fail_field("partial_rotary_factor", "must be in (0, 1]");
  } else if (kind != "default") {
    r.fail_field("rope_type", "\"" + kind + "\" is not run (default and proportional are)");
  }
  return a;
}

}  // namespace

bool is_diffusion_gemma(const nlohmann::json& config) {
  if (config.value("model_type", nlohmann::json()).is_string() &&
      config["model_type"].get<std::string>() == "diffusion_gemma")
    return true;
  if (config.contains("architectures") && config["architectures"].is_array())
    for (const auto& a : config["architectures"])
      if (a.is_string() && a.get<std::string>() == "DiffusionGemmaForBlockDiffusion") return true;
  return false;
}

void read_uniform_state_params(const nlohmann::json& j, const std::string& file, UniformStateParams& p) {
  if (!j.is_object()) fail(file, ": must be a JSON object of generate() settings, got ", j.dump());
  const ConfigReader r(j, file);
  auto count = [&](const char* key, std::optional<int64_t>& out, int64_t least) {
    if (auto v = r.optional_int(key)) {
      if (*v < least)
        r.fail_field(key, "must be >= " + std::to_string(least) + ", got " + std::to_string(*v));
      out = *v;
    }
  };
  auto number = [&](const nlohmann::json& obj, const ConfigReader& reader, const char* key,
                    std::optional<double>& out) {
    if (!obj.contains(key)) return;
    if (auto v = reader.optional_number(key)) {
      if (!std::isfinite(*v) || *v < 0) reader.fail_field(key, "must be a finite number >= 0");
      out = *v;
    }
  };
  count("max_new_tokens", p.max_new_tokens, 1);
  count("max_length", p.max_length, 1);
  count("max_denoising_steps", p.max_denoising_steps, 1);
  count("stability_threshold", p.stability_threshold, 0);
  number(j, r, "t_min", p.t_min);
  number(j, r, "t_max", p.t_max);
  number(j, r, "confidence_threshold", p.confidence_threshold);
  number(j, r, "entropy_bound", p.entropy_bound);
  if (j.contains("sampler_config") && j["sampler_config"].is_object()) {
    const ConfigReader s(j["sampler_config"], file + " sampler_config");
    number(j["sampler_config"], s, "entropy_bound", p.entropy_bound);
  }
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null())
    p.eos_ids = token_list(j["eos_token_id"], file, "eos_token_id");
  if (auto pad = r.optional_int("pad_token_id")) p.pad_id = static_cast<int32_t>(*pad);
}

DiffusionGemmaConfig parse_diffusion_gemma_config(const Checkpoint& ckpt) {
  const std::string file = ckpt.dir() + "/config.json";
  const nlohmann::json& top = ckpt.config();
  if (!top.contains("text_config") || !top["text_config"].is_object())
    fail(file, ": field 'text_config' is missing (DiffusionGemma keeps its text model's settings there)");
  const nlohmann::json& t = top["text_config"];
  const ConfigReader r(t, file + " text_config");
  const ConfigReader rt(top, file);

  DiffusionGemmaConfig c;
  ModelInfo& m = c.info;
  m.path = ckpt.dir();
  m.architecture = "diffusion_gemma";
  m.d_model = r.positive_int("hidden_size");
  m.n_layers = r.positive_int("num_hidden_layers");
  m.n_heads = r.positive_int("num_attention_heads");
  m.n_kv_heads = r.positive_int("num_key_value_heads");
  m.head_dim = r.positive_int("head_dim");
  m.ffn_hidden = r.positive_int("intermediate_size");
  m.vocab_size = r.positive_int("vocab_size");
  m.max_seq_len = r.optional_int("max_position_embeddings").value_or(131072);
  m.n_experts = r.positive_int("num_experts");
  m.n_experts_used = r.positive_int("top_k_experts");
  if (m.n_experts_used > m.n_experts) r.fail_field("top_k_experts", "is more than num_experts");
  c.expert_ffn = r.positive_int("moe_intermediate_size");
  c.canvas_length = rt.positive_int("canvas_length");
  c.sliding_window = r.positive_int("sliding_window");
  c.rms_eps = static_cast<float>(r.optional_number("rms_norm_eps").value_or(1e-6));
  // C:99: a class attribute in the reference, 30.0 whatever the file says; a file that says otherwise is
  // read.
  c.softcap = static_cast<float>(r.optional_number("final_logit_softcapping").value_or(30.0));
  if (!(c.softcap > 0)) r.fail_field("final_logit_softcapping", "must be > 0");

  if (auto act = r.optional_string("hidden_activation"); act && *act != "gelu_pytorch_tanh")
    r.fail_field("hidden_activation", "is \"" + *act + "\"; DiffusionGemma runs gelu_pytorch_tanh");
  if (r.optional_bool("attention_bias").value_or(false))
    r.fail_field("attention_bias", "is true; DiffusionGemma's attention has no bias");
  if (auto bidi = r.optional_string("use_bidirectional_attention"); bidi && *bidi == "all")
    r.fail_field("use_bidirectional_attention",
                 "is \"all\" (a non-causal encoder with window W/2+1): not run; released checkpoints say "
                 "\"vision\"");

  c.sliding.kv_heads = m.n_kv_heads;
  c.sliding.head_dim = m.head_dim;
  c.full.kv_heads = r.optional_int("num_global_key_value_heads").value_or(m.n_kv_heads);  // C:130-138
  c.full.head_dim = r.optional_int("global_head_dim").value_or(512);
  if (c.full.kv_heads <= 0 || c.full.head_dim <= 0 || c.full.head_dim % 2 || c.sliding.head_dim % 2)
    r.fail_field("global_head_dim",
                 "and head_dim must be even and > 0 (with num_global_key_value_heads > 0)");
  if (m.n_heads % c.sliding.kv_heads || m.n_heads % c.full.kv_heads)
    r.fail_field("num_attention_heads", "must be a multiple of the key/value heads of both layer types");
  c.full.rope_theta = 1e6f;
  if (t.contains("rope_parameters") && t["rope_parameters"].is_object()) {
    c.sliding = read_rope(t["rope_parameters"], file, "sliding_attention", c.sliding);
    c.full = read_rope(t["rope_parameters"], file, "full_attention", c.full);
  }

  if (t.contains("layer_types") && !t["layer_types"].is_null()) {
    if (!t["layer_types"].is_array() || static_cast<int64_t>(t["layer_types"].size()) != m.n_layers)
      r.fail_field("layer_types", "must list one type per layer (num_hidden_layers)");
    for (const auto& type : t["layer_types"]) {
      const std::string s = type.is_string() ? type.get<std::string>() : type.dump();
      if (s != "sliding_attention" && s != "full_attention")
        r.fail_field("layer_types", "holds \"" + s + "\"; sliding_attention or full_attention");
      c.layer_sliding.push_back(s == "sliding_attention");
    }
  } else {  // C:110-121: five sliding then one full, the last layer full
    for (int64_t i = 0; i < m.n_layers; ++i) c.layer_sliding.push_back((i + 1) % 6 != 0);
    c.layer_sliding.back() = false;
  }

  // Special ids: text_config's, the top level's eos list, then generation_config.json.
  m.bos_id = static_cast<int32_t>(r.optional_token_id("bos_token_id").value_or(2));
  m.pad_id = static_cast<int32_t>(r.optional_token_id("pad_token_id").value_or(0));
  std::vector<int32_t> eos =
      top.contains("eos_token_id") && !top["eos_token_id"].is_null()
          ? token_list(top["eos_token_id"], file, "eos_token_id")
          : std::vector<int32_t>{static_cast<int32_t>(r.optional_token_id("eos_token_id").value_or(1))};

  // The released generation_config.json's values stand for a file that lacks them.
  UniformStateParams& g = c.generation;
  g.max_new_tokens = 256;
  g.max_denoising_steps = 48;
  g.t_min = 0.4;
  g.t_max = 0.8;
  g.entropy_bound = 0.1;
  g.stability_threshold = 1;
  g.confidence_threshold = 0.005;
  g.eos_ids = eos;
  g.pad_id = m.pad_id;
  if (!ckpt.generation_config().empty())
    read_uniform_state_params(ckpt.generation_config(), ckpt.dir() + "/generation_config.json", g);
  m.eos_id = g.eos_ids->empty() ? -1 : g.eos_ids->front();
  m.eog_ids = *g.eos_ids;
  for (int32_t id : m.eog_ids)
    if (id < 0 || id >= m.vocab_size) fail(file, ": eos token id ", id, " is outside the vocabulary");
  if (m.pad_id < 0 || m.pad_id >= m.vocab_size) r.fail_field("pad_token_id", "is outside the vocabulary");
  return c;
}

}  // namespace dllm
