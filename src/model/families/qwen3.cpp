// Qwen3 (Qwen3ForCausalLM): an autoregressive model on the shared Transformer, run causally with a KV cache
// (ModelInfo::autoregressive). Dense SwiGLU, GQA, per-head q/k RMSNorm before RoPE, no biases, head_dim may
// differ from hidden_size / heads. The tensor names are SDAR's (SDAR is a block-diffusion Qwen3) and
// llama.cpp's qwen3 GGUF names apply. Settings the Transformer does not implement are rejected by name. The
// family description: see model/family.h.
#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace dllm {

namespace {

const std::vector<std::string> kEogTexts = {"<|im_end|>", "<|endoftext|>"};

TransformerConfig parse_config(const Checkpoint& ckpt) {
  const auto& cfg = ckpt.config();
  ConfigReader r(cfg, ckpt.dir() + "/config.json");
  reject_unsupported_hf_settings(r, cfg, "Qwen3", "full causal attention");
  if (r.optional_bool("attention_bias").value_or(false))
    r.fail_field("attention_bias", "= true is not supported (Qwen3 checkpoints have no attention biases)");
  TransformerConfig c = parse_causal_lm_config(ckpt, "qwen3", 1e-6, kEogTexts);
  c.qk_norm = true;
  return c;
}

}  // namespace

const Family& qwen3_family() {
  static const Family kFamily = {
      .name = "qwen3",
      .hf_architectures = {"Qwen3ForCausalLM"},
      .model_types = {"qwen3"},
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
      .tied_head_may_be_stored = true,
      .gguf_rms_eps = 1e-6f,
      .default_mask_id = std::nullopt,
      .eot_text = "<|im_end|>",
      .tokenizer_pre = "qwen2",
      .add_bos = false,
      .autoregressive = true,
      .eog_texts = kEogTexts,
  };
  return kFamily;
}

}  // namespace dllm
