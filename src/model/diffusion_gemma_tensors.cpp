#include "model/diffusion_gemma_tensors.h"

#include "model/diffusion_gemma.h"

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

std::vector<std::pair<std::string, std::vector<int64_t>>> diffusion_gemma_tensor_shapes(
    const DiffusionGemmaConfig& c) {
  const ModelInfo& m = c.info;
  const int64_t d = m.d_model, E = m.n_experts, F = c.expert_ffn, I = m.ffn_hidden, H = m.n_heads;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out = {
      {"model.decoder.embed_tokens.weight", {m.vocab_size, d}},
      {"model.decoder.norm.weight", {d}},
      {"model.decoder.self_conditioning.pre_norm.weight", {d}},
      {"model.decoder.self_conditioning.gate_proj.weight", {I, d}},
      {"model.decoder.self_conditioning.up_proj.weight", {I, d}},
      {"model.decoder.self_conditioning.down_proj.weight", {d, I}},
  };
  for (int64_t i = 0; i < m.n_layers; ++i) {
    const bool sliding = c.layer_sliding[static_cast<size_t>(i)];
    const DiffusionGemmaConfig::Attention& a = sliding ? c.sliding : c.full;
    const std::string p = "model.decoder.layers." + std::to_string(i) + ".";
    out.push_back({p + "input_layernorm.weight", {d}});
    out.push_back({p + "self_attn.q_proj.weight", {H * a.head_dim, d}});
    out.push_back({p + "self_attn.k_proj.weight", {a.kv_heads * a.head_dim, d}});
    if (sliding) out.push_back({p + "self_attn.v_proj.weight", {a.kv_heads * a.head_dim, d}});
    out.push_back({p + "self_attn.o_proj.weight", {d, H * a.head_dim}});
    out.push_back({p + "self_attn.q_norm.weight", {a.head_dim}});
    out.push_back({p + "self_attn.k_norm.weight", {a.head_dim}});
    out.push_back({p + "post_attention_layernorm.weight", {d}});
    out.push_back({p + "pre_feedforward_layernorm.weight", {d}});
    out.push_back({p + "mlp.gate_proj.weight", {I, d}});
    out.push_back({p + "mlp.up_proj.weight", {I, d}});
    out.push_back({p + "mlp.down_proj.weight", {d, I}});
    out.push_back({p + "post_feedforward_layernorm_1.weight", {d}});
    out.push_back({p + "pre_feedforward_layernorm_2.weight", {d}});
    out.push_back({p + "post_feedforward_layernorm_2.weight", {d}});
    out.push_back({p + "post_feedforward_layernorm.weight", {d}});
    out.push_back({p + "router.proj.weight", {E, d}});
    out.push_back({p + "router.scale", {d}});
    out.push_back({p + "router.per_expert_scale", {E}});
    out.push_back({p + "experts.gate_up_proj", {E, 2 * F, d}});
    out.push_back({p + "experts.down_proj", {E, d, F}});
    out.push_back({p + "layer_scalar", {1}});
    out.push_back({"model.encoder.language_model.layers." + std::to_string(i) + ".layer_scalar", {1}});
  }
  return out;
}

}  // namespace dllm
