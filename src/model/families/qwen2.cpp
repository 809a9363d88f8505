// Qwen2 / Qwen2.5 (Qwen2ForCausalLM): an autoregressive model on the shared Transformer, run causally with a
// KV cache (ModelInfo::autoregressive). q/k/v carry biases, attention may be GQA, the head may be tied to the
// embedding (then llama.cpp's GGUF has no output tensor). Qwen2's tensor names are Dream's (Dream is a
// diffusion-trained Qwen2), and llama.cpp's qwen2 GGUF names apply. Settings the Transformer does not
// implement (sliding window, RoPE scaling) are rejected by name. The family description: see model/family.h.
#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace dllm {

namespace {

const std::vector<std::string> kEogTexts = {"<|im_end|>", "<|endoftext|>"};

TransformerConfig parse_config(const Checkpoint& ckpt) {
  const auto& cfg = ckpt.config();
  ConfigReader r(cfg, ckpt.dir() + "/config.json");
  reject_unsupported_hf_settings(r, cfg, "Qwen2", "full causal attention");
  TransformerConfig c = parse_causal_lm_config(ckpt, "qwen2", 1e-6, kEogTexts);
  c.qkv_bias = true;  // Qwen2Attention: q/k/v always have biases, o_proj none
  return c;
}

}  // namespace

const Family& qwen2_family() {
  static const Family kFamily = {
      .name = "qwen2",
      .hf_architectures = {"Qwen2ForCausalLM"},
      .model_types = {"qwen2"},
      .parse_hf_config = &parse_config,
      .tensors =
          {
              {TensorRole::kEmbedding, "model.embed_tokens.weight", "token_embd.weight"},
              {TensorRole::kOutputNorm, "model.norm.weight", "output_norm.weight"},
              {TensorRole::kHead, "lm_head.weight", "output.weight"},
              {TensorRole::kAttnNorm, "model.layers.{}.input_layernorm.weight", "blk.{}.attn_norm.weight"},
              {TensorRole::kQ, "model.layers.{}.self_attn.q_proj.weight", "blk.{}.attn_q.weight"},
              {TensorRole::kQBias, "model.layers.{}.self_attn.q_proj.bias", "blk.{}.attn_q.bias"},
              {TensorRole::kK, "model.layers.{}.self_attn.k_proj.weight", "blk.{}.attn_k.weight"},
              {TensorRole::kKBias, "model.layers.{}.self_attn.k_proj.bias", "blk.{}.attn_k.bias"},
              {TensorRole::kV, "model.layers.{}.self_attn.v_proj.weight", "blk.{}.attn_v.weight"},
              {TensorRole::kVBias, "model.layers.{}.self_attn.v_proj.bias", "blk.{}.attn_v.bias"},
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
