// SDAR (JetAstra/SDAR-*-Chat, TraDo): block-diffusion models on the Qwen3 layout. Dense SwiGLU, GQA, per-head
// q/k RMSNorm before RoPE, no biases; generated block by block with block-causal attention (config.json
// block_size is the trained block length). Tensor names are Qwen3's, so llama.cpp's qwen3 GGUF names apply.
// Settings the Transformer does not implement are rejected by name. The family description: see
// model/family.h.
#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace dllm {

namespace {

TransformerConfig parse_config(const Checkpoint& ckpt) {
  const auto& cfg = ckpt.config();
  ConfigReader r(cfg, ckpt.dir() + "/config.json");
  ConfigReader g(ckpt.generation_config(), ckpt.dir() + "/generation_config.json");
  reject_unsupported_hf_settings(r, cfg, "SDAR", "block-causal full attention");
  if (r.optional_bool("attention_bias").value_or(false))
    r.fail_field("attention_bias", "= true is not supported (SDAR checkpoints have no attention biases)");

  TransformerConfig c;
  c.qk_norm = true;
  ModelInfo& m = c.info;
  m.path = ckpt.dir();
  m.architecture = "sdar";
  read_standard_sizes(r, c);
  read_rope_theta_and_rms_eps(r, 1e-6, c);
  m.block_size = r.optional_int("block_size").value_or(4);
  if (m.block_size <= 0) r.fail_field("block_size", "must be > 0");

  const auto mask = r.optional_int("mask_token_id");
  if (!mask) r.fail_field("mask_token_id", "is missing (SDAR needs the [MASK] id to denoise)");
  m.mask_id = static_cast<int32_t>(*mask);
  m.eos_id = static_cast<int32_t>(
      r.optional_token_id("eos_token_id").value_or(g.optional_token_id("eos_token_id").value_or(-1)));
  m.pad_id = static_cast<int32_t>(r.optional_token_id("pad_token_id").value_or(m.eos_id));
  m.bos_id = static_cast<int32_t>(r.optional_token_id("bos_token_id").value_or(-1));
  // The end of a chat turn: <|im_end|> in tokenizer.json, else the other id of generation_config's eos list.
  m.eot_id = static_cast<int32_t>(find_added_token(ckpt.dir(), {"<|im_end|>"}).value_or(-1));
  const auto& gen = ckpt.generation_config();
  if (m.eot_id < 0 && gen.contains("eos_token_id") && gen["eos_token_id"].is_array())
    for (const auto& id : gen["eos_token_id"])
      if (id.is_number_integer() && id.get<int64_t>() != m.eos_id) {
        m.eot_id = id.get<int32_t>();
        break;
      }
  check_special_ids_in_vocab(r, m);
  if (m.mask_id < 0) r.fail_field("mask_token_id", "must be >= 0");
  c.tied_head = r.optional_bool("tie_word_embeddings").value_or(false);
  return c;
}

}  // namespace

const Family& sdar_family() {
  static const Family kFamily = {
      .name = "sdar",
      .hf_architectures = {"SDARForCausalLM"},
      .model_types = {"sdar"},
      .parse_hf_config = &parse_config,
      .tensors =
          {
              {TensorRole::kEmbedding, "model.embed_tokens.weight", "token_embd.weight"},
              {TensorRole::kOutputNorm, "model.norm.weight", "output_norm.weight"},
              {TensorRole::kHead, "lm_head.weight", "output.weight"},
              {TensorRole::kAttnNorm, "model.layers.{}.input_layernorm.weight", "blk.{}.attn_norm.weight"},
              {TensorRole::kQ, "model.layers.{}.self_attn.q_proj.weight", "blk.{}.attn_q.weight"},
              {TensorRole::kQNorm, "model.layers.{}.self_attn.q_norm.weight", "blk.{}.attn_q_norm.weight"},
              {TensorRole::kK, "model.layers.{}.self_attn.k_proj.weight", "blk.{}.attn_k.weight"},
              {TensorRole::kKNorm, "model.layers.{}.self_attn.k_norm.weight", "blk.{}.attn_k_norm.weight"},
              {TensorRole::kV, "model.layers.{}.self_attn.v_proj.weight", "blk.{}.attn_v.weight"},
              {TensorRole::kAttnOut, "model.layers.{}.self_attn.o_proj.weight", "blk.{}.attn_output.weight"},
              {TensorRole::kFfnNorm, "model.layers.{}.post_attention_layernorm.weight",
               "blk.{}.ffn_norm.weight"},
              {TensorRole::kGate, "model.layers.{}.mlp.gate_proj.weight", "blk.{}.ffn_gate.weight"},
              {TensorRole::kUp, "model.layers.{}.mlp.up_proj.weight", "blk.{}.ffn_up.weight"},
              {TensorRole::kDown, "model.layers.{}.mlp.down_proj.weight", "blk.{}.ffn_down.weight"},
          },
      .shift_logits = false,
      .tied_head_may_be_stored = true,
      .gguf_rms_eps = 1e-6f,
      .default_mask_id = std::nullopt,
      .eot_text = "<|im_end|>",
      .tokenizer_pre = "qwen2",
      .add_bos = false,
      .gguf_block_size = 4,  // SDARConfig's default block_size
  };
  return kFamily;
}

}  // namespace dllm
