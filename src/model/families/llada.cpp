// LLaDA (GSAI-ML/LLaDA-8B-*, LLaDA-1.5): config.json of LLaDAConfig and the OLMo-style tensor names of
// modeling_llada.py, mapped onto the shared Transformer (the family description, see model/family.h). Only
// the "llama" block with RMSNorm, RoPE and SwiGLU is used by released LLaDA checkpoints; any other setting is
// rejected by name rather than run wrongly.
#include <limits>
#include <optional>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace dllm {

namespace {

void require(const ConfigReader& r, const nlohmann::json& cfg, const std::string& key,
             const nlohmann::json& want) {
  if (cfg.contains(key) && !cfg[key].is_null() && cfg[key] != want)
    r.fail_field(key,
                 "= " + cfg[key].dump() + " is not supported (LLaDA checkpoints use " + want.dump() + ")");
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
    r.fail_field("n_kv_heads",
                 "= " + std::to_string(m.n_kv_heads) + " must divide n_heads = " + std::to_string(m.n_heads));
  if (m.d_model % m.n_heads != 0)
    r.fail_field("n_heads",
                 "= " + std::to_string(m.n_heads) + " must divide d_model = " + std::to_string(m.d_model));
  m.head_dim = m.d_model / m.n_heads;
  if (m.head_dim % 2 != 0) r.fail_field("n_heads", "gives an odd head_dim, which RoPE cannot rotate");
  if (auto hidden = r.optional_int("mlp_hidden_size")) {
    if (*hidden <= 0) r.fail_field("mlp_hidden_size", "must be > 0");
    m.ffn_hidden = *hidden;
  } else {
    const int64_t ratio = r.positive_int("mlp_ratio");
    if (ratio > std::numeric_limits<int64_t>::max() / m.d_model)
      r.fail_field("mlp_ratio", "* d_model overflows");
    m.ffn_hidden = ratio * m.d_model;
  }
  const int64_t vocab = r.positive_int("vocab_size");
  m.vocab_size = r.optional_int("embedding_size").value_or(vocab);  // the embedding is padded to this size
  if (m.vocab_size < vocab) r.fail_field("embedding_size", "is smaller than vocab_size");
  m.max_seq_len = r.optional_int("max_sequence_length").value_or(4096);
  if (m.max_seq_len <= 0) r.fail_field("max_sequence_length", "must be > 0");
  read_rope_theta_and_rms_eps(r, 1e-5, c);

  // Token ids are checked against the (padded) vocabulary before narrowing, naming the file they came from.
  const int64_t vocab_size = m.vocab_size;
  auto in_vocab = [&](const ConfigReader& from, const char* key, int64_t id) {
    if (id < 0 || id >= vocab_size)
      from.fail_field(key, "= " + std::to_string(id) + " is outside the vocabulary [0, " +
                               std::to_string(vocab_size) + ")");
    return static_cast<int32_t>(id);
  };
  auto token = [&](const char* key, const ConfigReader& first,
                   const ConfigReader& second) -> std::optional<int32_t> {
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
      fail(ckpt.dir(), "/tokenizer.json: added token <|eot_id|> has id ", *added,
           ", outside the vocabulary [0, ", vocab_size, ")");
    m.eot_id = static_cast<int32_t>(*added);
  }
  m.shift_logits = false;
  c.tied_head = r.optional_bool("weight_tying").value_or(false);
  return c;
}

}  // namespace

const Family& llada_family() {
  static const Family kFamily = {
      .name = "llada",
      .hf_architectures = {"LLaDAModelLM"},
      .model_types = {"llada"},
      .parse_hf_config = &parse_config,
      .tensors =
          {
              {TensorRole::kEmbedding, "model.transformer.wte.weight", "token_embd.weight"},
              {TensorRole::kOutputNorm, "model.transformer.ln_f.weight", "output_norm.weight"},
              {TensorRole::kHead, "model.transformer.ff_out.weight", "output.weight"},
              {TensorRole::kAttnNorm, "model.transformer.blocks.{}.attn_norm.weight",
               "blk.{}.attn_norm.weight"},
              {TensorRole::kFfnNorm, "model.transformer.blocks.{}.ff_norm.weight", "blk.{}.ffn_norm.weight"},
              {TensorRole::kQ, "model.transformer.blocks.{}.q_proj.weight", "blk.{}.attn_q.weight",
               GgufTransform::kRopePairRows},
              {TensorRole::kK, "model.transformer.blocks.{}.k_proj.weight", "blk.{}.attn_k.weight",
               GgufTransform::kRopePairRows},
              {TensorRole::kV, "model.transformer.blocks.{}.v_proj.weight", "blk.{}.attn_v.weight"},
              {TensorRole::kAttnOut, "model.transformer.blocks.{}.attn_out.weight",
               "blk.{}.attn_output.weight"},
              {TensorRole::kGate, "model.transformer.blocks.{}.ff_proj.weight", "blk.{}.ffn_gate.weight"},
              {TensorRole::kUp, "model.transformer.blocks.{}.up_proj.weight", "blk.{}.ffn_up.weight"},
              {TensorRole::kDown, "model.transformer.blocks.{}.ff_out.weight", "blk.{}.ffn_down.weight"},
          },
      .shift_logits = false,
      .gguf_rms_eps = 1e-5f,
      .default_mask_id = 126336,
      .eot_text = "<|eot_id|>",
      .tokenizer_pre = "default",
      .add_bos = true,
  };
  return kFamily;
}

}  // namespace dllm
