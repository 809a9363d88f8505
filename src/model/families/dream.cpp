// Dream (Dream-org/Dream-v0-{Instruct,Base}-7B, DiffuCoder, Dream-Coder): DreamConfig's config.json and the
// Qwen2 tensor names of modeling_dream.py mapped onto the shared Transformer. q/k/v carry biases, attention
// may be GQA, the head may be tied to the embedding. Generation shifts the logits (ModelInfo.shift_logits):
// position i is predicted by the output at i-1. Settings the Transformer does not implement (sliding window,
// RoPE scaling, mRoPE) are rejected by name rather than run wrongly. The family description: see
// model/family.h.
#include <limits>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace dllm {

namespace {

TransformerConfig parse_config(const Checkpoint& ckpt) {
  const auto& cfg = ckpt.config();
  ConfigReader r(cfg, ckpt.dir() + "/config.json");
  ConfigReader g(ckpt.generation_config(), ckpt.dir() + "/generation_config.json");
  reject_unsupported_hf_settings(r, cfg, "Dream", "bidirectional full attention");
  if (r.optional_bool("use_mrope").value_or(false)) r.fail_field("use_mrope", "= true is not supported");

  TransformerConfig c;
  c.qkv_bias = true;
  ModelInfo& m = c.info;
  m.path = ckpt.dir();
  m.architecture = "dream";
  read_standard_sizes(r, c);
  read_rope_theta_and_rms_eps(r, 1e-6, c);

  // DreamGenerationConfig.from_model_config takes the special ids from config.json.
  const auto mask = r.optional_int("mask_token_id");
  if (!mask) r.fail_field("mask_token_id", "is missing (Dream needs the [MASK] id to denoise)");
  m.mask_id = static_cast<int32_t>(*mask);
  m.eos_id = static_cast<int32_t>(
      r.optional_token_id("eos_token_id").value_or(g.optional_token_id("eos_token_id").value_or(-1)));
  m.pad_id = static_cast<int32_t>(r.optional_token_id("pad_token_id").value_or(m.eos_id));
  m.bos_id = static_cast<int32_t>(
      r.optional_token_id("bos_token_id").value_or(g.optional_token_id("bos_token_id").value_or(-1)));
  m.eot_id = static_cast<int32_t>(find_added_token(ckpt.dir(), {"<|im_end|>"}).value_or(-1));
  check_special_ids_in_vocab(r, m);
  if (m.mask_id < 0) r.fail_field("mask_token_id", "must be >= 0");
  m.shift_logits = true;
  c.tied_head = r.optional_bool("tie_word_embeddings").value_or(false);
  return c;
}

}  // namespace

const Family& dream_family() {
  static const Family kFamily = {
      .name = "dream",
      .hf_architectures = {"DreamModel"},
      .model_types = {"Dream", "dream"},
      .parse_hf_config = &parse_config,
      .tensors =
          {
              {TensorRole::kEmbedding, "model.embed_tokens.weight", "token_embd.weight"},
              {TensorRole::kOutputNorm, "model.norm.weight", "output_norm.weight"},
              {TensorRole::kHead, "lm_head.weight", "output.weight"},
              {TensorRole::kAttnNorm, "model.layers.{}.input_layernorm.weight", "blk.{}.attn_norm.weight"},
              {TensorRole::kFfnNorm, "model.layers.{}.post_attention_layernorm.weight",
               "blk.{}.ffn_norm.weight"},
              {TensorRole::kQ, "model.layers.{}.self_attn.q_proj.weight", "blk.{}.attn_q.weight"},
              {TensorRole::kQBias, "model.layers.{}.self_attn.q_proj.bias", "blk.{}.attn_q.bias"},
              {TensorRole::kK, "model.layers.{}.self_attn.k_proj.weight", "blk.{}.attn_k.weight"},
              {TensorRole::kKBias, "model.layers.{}.self_attn.k_proj.bias", "blk.{}.attn_k.bias"},
              {TensorRole::kV, "model.layers.{}.self_attn.v_proj.weight", "blk.{}.attn_v.weight"},
              {TensorRole::kVBias, "model.layers.{}.self_attn.v_proj.bias", "blk.{}.attn_v.bias"},
              {TensorRole::kAttnOut, "model.layers.{}.self_attn.o_proj.weight", "blk.{}.attn_output.weight"},
              {TensorRole::kGate, "model.layers.{}.mlp.gate_proj.weight", "blk.{}.ffn_gate.weight"},
              {TensorRole::kUp, "model.layers.{}.mlp.up_proj.weight", "blk.{}.ffn_up.weight"},
              {TensorRole::kDown, "model.layers.{}.mlp.down_proj.weight", "blk.{}.ffn_down.weight"},
          },
      .shift_logits = true,
      .tied_head_may_be_stored = true,
      .gguf_rms_eps = 1e-6f,
      .default_mask_id = std::nullopt,
      .eot_text = "<|im_end|>",
      .tokenizer_pre = "qwen2",
      .add_bos = false,
  };
  return kFamily;
}

}  // namespace dllm
