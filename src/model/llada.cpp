// LLaDA (GSAI-ML/LLaDA-8B-*, LLaDA-1.5): config.json of LLaDAConfig and the OLMo-style tensor names of
// modeling_llada.py, mapped onto the shared Transformer. Only the "llama" block with RMSNorm, RoPE and SwiGLU is
// used by released LLaDA checkpoints; any other setting is rejected by name rather than run wrongly.
#include <limits>
#include <optional>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/registry.h"
#include "model/transformer.h"

namespace dllm {

namespace {

void require(const ConfigReader& r, const nlohmann::json& cfg, const std::string& key, const nlohmann::json& want) {
  if (cfg.contains(key) && !cfg[key].is_null() && cfg[key] != want)
    r.fail_field(key, "= " + cfg[key].dump() + " is not supported (LLaDA checkpoints use " + want.dump() + ")");
}

TransformerConfig parse_config(const Checkpoint& ckpt) {
  const auto& cfg = ckpt.config();
  ConfigReader r(cfg, ckpt.dir() + "/config.json");
  ConfigReader g(ckpt.generation_config(), ckpt.dir() + "/generation_config.json");
  require(r, cfg, "block_type", "llama");
  require(r, cfg, "layer_norm_type", "rms");
  require(r, cfg, "activation_type", "silu");
  require(r, cfg, "alibi", false);
  require(r, cfg, "rope", true);
  require(r, cfg, "include_bias", false);
  require(r, cfg, "include_qkv_bias", false);
  require(r, cfg, "attention_layer_norm", false);
  require(r, cfg, "input_emb_norm", false);
  require(r, cfg, "scale_logits", false);
  require(r, cfg, "block_group_size", 1);

  TransformerConfig c;
  ModelInfo& m = c.info;
  m.path = ckpt.dir();
  m.architecture = "llada";
  m.d_model = r.positive_int("d_model");
  m.n_layers = r.positive_int("n_layers");
  m.n_heads = r.positive_int("n_heads");
  m.n_kv_heads = r.optional_int("n_kv_heads").value_or(m.n_heads);
  if (m.n_kv_heads <= 0 || m.n_heads % m.n_kv_heads != 0)
    r.fail_field("n_kv_heads", "= " + std::to_string(m.n_kv_heads) + " must divide n_heads = " +
                                   std::to_string(m.n_heads));
  if (m.d_model % m.n_heads != 0)
    r.fail_field("n_heads", "= " + std::to_string(m.n_heads) + " must divide d_model = " + std::to_string(m.d_model));
  m.head_dim = m.d_model / m.n_heads;
  if (m.head_dim % 2 != 0) r.fail_field("n_heads", "gives an odd head_dim, which RoPE cannot rotate");
  if (auto hidden = r.optional_int("mlp_hidden_size")) {
    if (*hidden <= 0) r.fail_field("mlp_hidden_size", "must be > 0");
    m.ffn_hidden = *hidden;
  } else {
    const int64_t ratio = r.positive_int("mlp_ratio");
    if (ratio > std::numeric_limits<int64_t>::max() / m.d_model) r.fail_field("mlp_ratio", "* d_model overflows");
    m.ffn_hidden = ratio * m.d_model;
  }
  const int64_t vocab = r.positive_int("vocab_size");
  m.vocab_size = r.optional_int("embedding_size").value_or(vocab);  // the embedding is padded to this size
  if (m.vocab_size < vocab) r.fail_field("embedding_size", "is smaller than vocab_size");
  m.max_seq_len = r.optional_int("max_sequence_length").value_or(4096);
  if (m.max_seq_len <= 0) r.fail_field("max_sequence_length", "must be > 0");
  // Checked as doubles: a value outside float's range must not reach the (undefined) narrowing conversion.
  const double rope_theta = r.optional_number("rope_theta").value_or(10000.0);
  const double rms_eps = r.optional_number("rms_norm_eps").value_or(1e-5);
  if (!(rope_theta > 0) || !(rope_theta <= std::numeric_limits<float>::max()))
    r.fail_field("rope_theta", "must be > 0 and finite in float32, got " + std::to_string(rope_theta));
  if (!(rms_eps > 0) || !(rms_eps <= 1))
    r.fail_field("rms_norm_eps", "must be in (0, 1], got " + std::to_string(rms_eps));
  c.rope_theta = static_cast<float>(rope_theta);
  c.rms_eps = static_cast<float>(rms_eps);

  // Token ids are checked against the (padded) vocabulary before narrowing, naming the file they came from.
  const int64_t vocab_size = m.vocab_size;
  auto in_vocab = [&](const ConfigReader& from, const char* key, int64_t id) {
    if (id < 0 || id >= vocab_size)
      from.fail_field(key, "= " + std::to_string(id) + " is outside the vocabulary [0, " +
                               std::to_string(vocab_size) + ")");
    return static_cast<int32_t>(id);
  };
  auto token = [&](const char* key, const ConfigReader& first, const ConfigReader& second) -> std::optional<int32_t> {
    if (auto v = first.optional_token_id(key)) return in_vocab(first, key, *v);
    if (auto v = second.optional_token_id(key)) return in_vocab(second, key, *v);
    return std::nullopt;
  };
  m.mask_id = in_vocab(r, "mask_token_id", r.optional_int("mask_token_id").value_or(126336));
  m.eos_id = token("eos_token_id", r, g).value_or(-1);
  m.pad_id = token("pad_token_id", r, g).value_or(m.eos_id);
  m.bos_id = token("bos_token_id", g, r).value_or(-1);
  if (auto eot = r.optional_token_id("eot_token_id")) {
    m.eot_id = in_vocab(r, "eot_token_id", *eot);
  } else if (auto added = find_added_token(ckpt.dir(), {"<|eot_id|>"})) {
    if (*added < 0 || *added >= vocab_size)
      fail(ckpt.dir(), "/tokenizer.json: added token <|eot_id|> has id ", *added, ", outside the vocabulary [0, ",
           vocab_size, ")");
    m.eot_id = static_cast<int32_t>(*added);
  }
  m.shift_logits = false;
  return c;
}

}  // namespace

std::shared_ptr<Model> load_llada(std::unique_ptr<Checkpoint> ckpt, const LoadOptions& options) {
  TransformerConfig c = parse_config(*ckpt);
  c.info.compute = options.compute;
  const ModelInfo& m = c.info;
  const ComputeType ct = c.info.compute;
  const int64_t d = m.d_model, q_dim = m.n_heads * m.head_dim, kv_dim = m.n_kv_heads * m.head_dim;
  const bool tied =
      ConfigReader(ckpt->config(), ckpt->dir() + "/config.json").optional_bool("weight_tying").value_or(false);

  TransformerWeights w;
  w.embedding = &ckpt->take("model.transformer.wte.weight", {m.vocab_size, d});
  for (int64_t i = 0; i < m.n_layers; ++i) {
    const std::string p = "model.transformer.blocks." + std::to_string(i) + ".";
    LayerWeights L;
    L.attn_norm = load_vector(*ckpt, p + "attn_norm.weight", d);
    L.q = load_linear(*ckpt, p + "q_proj.weight", q_dim, d, ct);
    L.k = load_linear(*ckpt, p + "k_proj.weight", kv_dim, d, ct);
    L.v = load_linear(*ckpt, p + "v_proj.weight", kv_dim, d, ct);
    L.o = load_linear(*ckpt, p + "attn_out.weight", d, q_dim, ct);
    L.ffn_norm = load_vector(*ckpt, p + "ff_norm.weight", d);
    L.gate = load_linear(*ckpt, p + "ff_proj.weight", m.ffn_hidden, d, ct);
    L.up = load_linear(*ckpt, p + "up_proj.weight", m.ffn_hidden, d, ct);
    L.down = load_linear(*ckpt, p + "ff_out.weight", d, m.ffn_hidden, ct);
    w.layers.push_back(std::move(L));
  }
  w.final_norm = load_vector(*ckpt, "model.transformer.ln_f.weight", d);
  const TensorView& head = tied ? *w.embedding : ckpt->take("model.transformer.ff_out.weight", {m.vocab_size, d});
  w.head = Linear(head.data, head.dtype, m.vocab_size, d, ct);
  ckpt->check_all_used();

  c.info.n_params = m.vocab_size * d * (tied ? 1 : 2) + d +
                    m.n_layers * (2 * d + d * (q_dim + 2 * kv_dim) + q_dim * d + 3 * d * m.ffn_hidden);
  return std::make_shared<Transformer>(std::move(c), std::move(ckpt), std::move(w));
}

}  // namespace dllm
