// Dream (Dream-org/Dream-v0-{Instruct,Base}-7B, DiffuCoder, Dream-Coder): DreamConfig's config.json and the Qwen2
// tensor names of modeling_dream.py mapped onto the shared Transformer. q/k/v carry biases, attention may be GQA,
// the head may be tied to the embedding. Generation shifts the logits (ModelInfo.shift_logits): position i is
// predicted by the output at i-1. Settings the Transformer does not implement (sliding window, RoPE scaling,
// mRoPE) are rejected by name rather than run wrongly.
#include "core/error.h"
#include "model/config_reader.h"
#include "model/registry.h"
#include "model/transformer.h"

namespace dllm {

namespace {

TransformerConfig parse_config(const Checkpoint& ckpt) {
  const auto& cfg = ckpt.config();
  ConfigReader r(cfg, ckpt.dir() + "/config.json");
  ConfigReader g(ckpt.generation_config(), ckpt.dir() + "/generation_config.json");
  if (auto act = r.optional_string("hidden_act"); act && *act != "silu")
    r.fail_field("hidden_act", "= \"" + *act + "\" is not supported (Dream checkpoints use \"silu\")");
  if (r.optional_bool("use_sliding_window").value_or(false))
    r.fail_field("use_sliding_window", "= true is not supported (bidirectional full attention only)");
  if (r.optional_bool("use_mrope").value_or(false)) r.fail_field("use_mrope", "= true is not supported");
  if (cfg.contains("rope_scaling") && !cfg["rope_scaling"].is_null())
    r.fail_field("rope_scaling", "= " + cfg["rope_scaling"].dump() + " is not supported (only plain RoPE)");

  TransformerConfig c;
  c.qkv_bias = true;
  ModelInfo& m = c.info;
  m.path = ckpt.dir();
  m.architecture = "dream";
  m.d_model = r.positive_int("hidden_size");
  m.n_layers = r.positive_int("num_hidden_layers");
  m.n_heads = r.positive_int("num_attention_heads");
  m.n_kv_heads = r.optional_int("num_key_value_heads").value_or(m.n_heads);
  if (m.n_kv_heads <= 0 || m.n_heads % m.n_kv_heads != 0)
    r.fail_field("num_key_value_heads", "= " + std::to_string(m.n_kv_heads) +
                                            " must divide num_attention_heads = " + std::to_string(m.n_heads));
  if (auto hd = r.optional_int("head_dim")) {
    m.head_dim = *hd;
  } else {
    if (m.d_model % m.n_heads != 0)
      r.fail_field("num_attention_heads", "= " + std::to_string(m.n_heads) + " must divide hidden_size = " +
                                              std::to_string(m.d_model));
    m.head_dim = m.d_model / m.n_heads;
  }
  if (m.head_dim <= 0 || m.head_dim % 2 != 0)
    r.fail_field("head_dim", "= " + std::to_string(m.head_dim) + " must be even and > 0 for RoPE");
  m.ffn_hidden = r.positive_int("intermediate_size");
  m.vocab_size = r.positive_int("vocab_size");
  m.max_seq_len = r.optional_int("max_position_embeddings").value_or(32768);
  if (m.max_seq_len <= 0) r.fail_field("max_position_embeddings", "must be > 0");
  c.rope_theta = static_cast<float>(r.optional_number("rope_theta").value_or(10000.0));
  c.rms_eps = static_cast<float>(r.optional_number("rms_norm_eps").value_or(1e-6));
  if (!(c.rope_theta > 0)) r.fail_field("rope_theta", "must be > 0");
  if (!(c.rms_eps > 0)) r.fail_field("rms_norm_eps", "must be > 0");

  // DreamGenerationConfig.from_model_config takes the special ids from config.json.
  const auto mask = r.optional_int("mask_token_id");
  if (!mask) r.fail_field("mask_token_id", "is missing (Dream needs the [MASK] id to denoise)");
  m.mask_id = static_cast<int32_t>(*mask);
  m.eos_id = static_cast<int32_t>(r.optional_token_id("eos_token_id").value_or(g.optional_token_id("eos_token_id").value_or(-1)));
  m.pad_id = static_cast<int32_t>(r.optional_token_id("pad_token_id").value_or(m.eos_id));
  m.bos_id = static_cast<int32_t>(r.optional_token_id("bos_token_id").value_or(g.optional_token_id("bos_token_id").value_or(-1)));
  m.eot_id = static_cast<int32_t>(find_added_token(ckpt.dir(), {"<|im_end|>"}).value_or(-1));
  for (auto [name, id] : {std::pair{"mask_token_id", m.mask_id}, {"eos_token_id", m.eos_id}, {"pad_token_id", m.pad_id},
                          {"bos_token_id", m.bos_id}})
    if (id >= m.vocab_size)
      r.fail_field(name, "= " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(m.vocab_size));
  if (m.mask_id < 0) r.fail_field("mask_token_id", "must be >= 0");
  m.shift_logits = true;
  return c;
}

}  // namespace

std::shared_ptr<Model> load_dream(std::unique_ptr<Checkpoint> ckpt, const LoadOptions& options) {
  TransformerConfig c = parse_config(*ckpt);
  c.info.compute = options.compute;
  const ModelInfo& m = c.info;
  const ComputeType ct = c.info.compute;
  const int64_t d = m.d_model, q_dim = m.n_heads * m.head_dim, kv_dim = m.n_kv_heads * m.head_dim;
  const bool tied = ckpt->config().value("tie_word_embeddings", false);

  TransformerWeights w;
  w.embedding = &ckpt->take("model.embed_tokens.weight", {m.vocab_size, d});
  for (int64_t i = 0; i < m.n_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights L;
    L.attn_norm = load_vector(*ckpt, p + "input_layernorm.weight", d);
    L.q = load_linear(*ckpt, p + "self_attn.q_proj.weight", q_dim, d, ct);  // (n_heads*hd, d)
    L.k = load_linear(*ckpt, p + "self_attn.k_proj.weight", kv_dim, d, ct);  // (n_kv_heads*hd, d)
    L.v = load_linear(*ckpt, p + "self_attn.v_proj.weight", kv_dim, d, ct);  // (n_kv_heads*hd, d)
    L.q_bias = load_vector(*ckpt, p + "self_attn.q_proj.bias", q_dim);
    L.k_bias = load_vector(*ckpt, p + "self_attn.k_proj.bias", kv_dim);
    L.v_bias = load_vector(*ckpt, p + "self_attn.v_proj.bias", kv_dim);
    L.o = load_linear(*ckpt, p + "self_attn.o_proj.weight", d, q_dim, ct);  // (d, n_heads*hd)
    L.ffn_norm = load_vector(*ckpt, p + "post_attention_layernorm.weight", d);
    L.gate = load_linear(*ckpt, p + "mlp.gate_proj.weight", m.ffn_hidden, d, ct);
    L.up = load_linear(*ckpt, p + "mlp.up_proj.weight", m.ffn_hidden, d, ct);
    L.down = load_linear(*ckpt, p + "mlp.down_proj.weight", d, m.ffn_hidden, ct);
    w.layers.push_back(std::move(L));
  }
  w.final_norm = load_vector(*ckpt, "model.norm.weight", d);
  // A tied checkpoint may still carry lm_head.weight (a copy of the embedding); it is then taken and not used.
  const TensorView* head = nullptr;
  if (!tied || ckpt->has("lm_head.weight")) head = &ckpt->take("lm_head.weight", {m.vocab_size, d});
  if (tied) head = w.embedding;
  w.head = Linear(head->data, head->dtype, m.vocab_size, d, ct);
  ckpt->check_all_used();

  c.info.n_params = m.vocab_size * d * (tied ? 1 : 2) + d +
                    m.n_layers * (2 * d + d * (q_dim + 2 * kv_dim) + q_dim + 2 * kv_dim + q_dim * d +
                                  3 * d * m.ffn_hidden);
  return std::make_shared<Transformer>(std::move(c), std::move(ckpt), std::move(w));
}

}  // namespace dllm
