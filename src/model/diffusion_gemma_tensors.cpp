#include "model/diffusion_gemma_tensors.h"

namespace dllm {

std::map<std::string, std::string> diffusion_gemma_gguf_names(int64_t layers) {
  static const std::pair<const char*, const char*> kGlobal[] = {
      {"model.decoder.embed_tokens.weight", "token_embd.weight"},
      {"model.decoder.norm.weight", "output_norm.weight"},
      {"model.decoder.self_conditioning.pre_norm.weight", "self_cond.norm.weight"},
      {"model.decoder.self_conditioning.gate_proj.weight", "self_cond.gate.weight"},
      {"model.decoder.self_conditioning.up_proj.weight", "self_cond.up.weight"},
      {"model.decoder.self_conditioning.down_proj.weight", "self_cond.down.weight"},
  };
  static const std::pair<const char*, const char*> kLayer[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight"},
      {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight"},
      {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
      {"router.proj.weight", "ffn_gate_inp.weight"},
      {"router.scale", "ffn_gate_inp.scale"},
      {"router.per_expert_scale", "ffn_down_exps.scale"},
      {"experts.gate_up_proj", "ffn_gate_up_exps.weight"},
      {"experts.down_proj", "ffn_down_exps.weight"},
      {"layer_scalar", "layer_output_scale.weight"},
  };
  std::map<std::string, std::string> names;
  for (const auto& [hf, gguf] : kGlobal) names[hf] = gguf;
  for (int64_t i = 0; i < layers; ++i) {
    const std::string n = std::to_string(i);
    for (const auto& [hf, gguf] : kLayer)
      names["model.decoder.layers." + n + "." + hf] = "blk." + n + "." + gguf;
    names["model.encoder.language_model.layers." + n + ".layer_scalar"] =
        "enc.blk." + n + ".layer_output_scale.weight";
  }
  return names;
}

}  // namespace dllm
