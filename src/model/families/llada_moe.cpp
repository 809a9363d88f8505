// LLaDA-MoE (inclusionAI/LLaDA-MoE-7B-A1B-Base / -Instruct): a bidirectional diffusion model on the OLMoE
// layout (modeling_lladamoe.py, LLaDAMoEModelLM). Per-head q/k RMSNorm before NEOX RoPE, no biases; each
// layer whose moe_layer_freq entry is 1 routes every token with a softmax over all experts (in f32) to the
// top num_experts_per_tok, the weights NOT renormalised (LLaDAMoESparseMoeBlock fixes norm_topk_prob = False)
// and not scaled; no shared expert, no expert bias. Generated with LLaDA's loop (no logit shift). GGUF names
// are llama.cpp's llada-moe ones, whose graph hard-codes the softmax router without renormalisation (so its
// converter writes no gating keys: Family::gguf_moe_*). Settings the Transformer does not implement are
// rejected by name. The family description: see model/family.h.
#include <string>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace dllm {

namespace {

// The official [MASK] id (<|mask|> of the 157184-token vocabulary; llama.cpp's converter writes it whatever
// the config says); used when neither config.json nor tokenizer.json names one and the vocabulary holds it.
constexpr int64_t kOfficialMaskId = 156895;

// moe_layer_freq: one 0 (dense) / 1 (mixture of experts) per layer, or the integer 1 (every layer MoE). The
// Transformer runs a leading run of dense layers, so the list must be zeros, then ones.
int64_t leading_dense_layers(const ConfigReader& r, const nlohmann::json& cfg, int64_t n_layers) {
  if (!cfg.contains("moe_layer_freq") || cfg["moe_layer_freq"].is_null())
    r.fail_field("moe_layer_freq", "is missing (LLaDA-MoE names each layer's MLP kind: 0 dense, 1 MoE)");
  const auto& freq = cfg["moe_layer_freq"];
  if (freq.is_number_integer()) {
    if (freq.get<int64_t>() != 1)
      r.fail_field("moe_layer_freq",
                   "= " + freq.dump() + " is not supported (a list of 0 / 1 per layer, or 1)");
    return 0;
  }
  if (!freq.is_array() || static_cast<int64_t>(freq.size()) != n_layers)
    r.fail_field("moe_layer_freq",
                 "must be a list of num_hidden_layers = " + std::to_string(n_layers) + " entries of 0 or 1");
  int64_t dense = 0;
  for (size_t i = 0; i < freq.size(); ++i) {
    const auto& v = freq[i];
    if (!v.is_number_integer() || (v.get<int64_t>() != 0 && v.get<int64_t>() != 1))
      r.fail_field("moe_layer_freq", "must hold 0 (dense) or 1 (MoE) per layer, got " + v.dump());
    if (v.get<int64_t>() == 0) {
      if (dense != static_cast<int64_t>(i))
        r.fail_field("moe_layer_freq", "has dense layer " + std::to_string(i) +
                                           " after a mixture-of-experts layer (only leading dense layers are "
                                           "supported)");
      ++dense;
    }
  }
  return dense;
}

void read_moe(const ConfigReader& r, const nlohmann::json& cfg, TransformerConfig& c) {
  TransformerConfig::Moe& moe = c.moe;
  moe.experts = r.positive_int("num_experts");
  moe.used = r.positive_int("num_experts_per_tok");
  moe.expert_ffn = r.positive_int("expert_intermediate_size");
  if (moe.used > moe.experts)
    r.fail_field("num_experts_per_tok",
                 "= " + std::to_string(moe.used) + " exceeds num_experts = " + std::to_string(moe.experts));
  if (auto f = r.optional_string("moe_router_score_function"); f && *f != "softmax")
    r.fail_field("moe_router_score_function",
                 "= \"" + *f + "\" is not supported (LLaDA-MoE routers use \"softmax\")");
  if (r.optional_bool("moe_router_enable_expert_bias").value_or(false))
    r.fail_field("moe_router_enable_expert_bias", "= true is not supported (no expert bias)");
  if (r.optional_bool("norm_topk_prob").value_or(false))
    r.fail_field("norm_topk_prob",
                 "= true is not supported (LLaDA-MoE never renormalises the top-k weights: "
                 "modeling_lladamoe.py and llama.cpp both ignore this flag)");
  if (auto scale = r.optional_number("routed_scaling_factor"); scale && *scale != 1.0)
    r.fail_field("routed_scaling_factor",
                 "= " + std::to_string(*scale) + " is not supported (the reference applies no scaling: 1)");
  for (const char* key : {"router_num_group", "router_topk_group"})
    if (auto groups = r.optional_int(key); groups && *groups > 1)
      r.fail_field(key, "= " + std::to_string(*groups) + " is not supported (no group-limited routing)");
  if (auto shared = r.optional_int("shared_expert_intermediate_size"); shared && *shared > 0)
    r.fail_field("shared_expert_intermediate_size", "> 0 is not supported (no shared expert)");
  moe.gating = TransformerConfig::Moe::Gating::kSoftmax;
  moe.normalize = false;
  moe.routed_scale = 1.0f;
  moe.shared = 0;
  moe.groups = moe.groups_used = 1;
  moe.expert_bias = false;
  moe.first_dense_layers = leading_dense_layers(r, cfg, c.info.n_layers);
  c.info.n_experts = moe.experts;
  c.info.n_experts_used = moe.used;
}

TransformerConfig parse_config(const Checkpoint& ckpt) {
  const auto& cfg = ckpt.config();
  ConfigReader r(cfg, ckpt.dir() + "/config.json");
  reject_unsupported_hf_settings(r, cfg, "LLaDA-MoE", "bidirectional full attention");
  if (r.optional_bool("attention_bias").value_or(false))
    r.fail_field("attention_bias",
                 "= true is not supported (LLaDA-MoE checkpoints have no attention biases)");
  if (auto clip = r.optional_number("clip_qkv"))
    r.fail_field("clip_qkv", "= " + std::to_string(*clip) + " is not supported (no q/k/v clipping)");

  TransformerConfig c;
  ModelInfo& m = c.info;
  m.path = ckpt.dir();
  m.architecture = "llada-moe";
  read_standard_sizes(r, c, /*ffn_key=*/nullptr);
  // The attention splits hidden_size into heads whatever head_dim says.
  if (m.head_dim * m.n_heads != m.d_model)
    r.fail_field("head_dim",
                 "= " + std::to_string(m.head_dim) +
                     " is not supported (LLaDA-MoE's heads are hidden_size / num_attention_heads = " +
                     std::to_string(m.d_model / m.n_heads) + " wide)");
  read_rope_theta_and_rms_eps(r, 1e-5, c);
  c.qk_norm = r.optional_bool("qk_layernorm").value_or(true);
  const double partial = r.optional_number("partial_rotary_factor").value_or(1.0);
  if (!(partial > 0) || !(partial <= 1))
    r.fail_field("partial_rotary_factor", "must be in (0, 1], got " + std::to_string(partial));
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(m.head_dim) * partial);  // int(), as transformers
  if (c.rotary_dim <= 0 || c.rotary_dim % 2 != 0)
    r.fail_field("partial_rotary_factor", "gives a rotary dimension of " + std::to_string(c.rotary_dim) +
                                              ", which must be even and > 0");
  if (c.rotary_dim == m.head_dim) c.rotary_dim = 0;
  read_moe(r, cfg, c);
  // The dense MLP's width matters only for dense layers; the GGUF file carries it either way.
  if (auto dense = r.optional_int("dense_intermediate_size")) {
    if (*dense <= 0) r.fail_field("dense_intermediate_size", "must be > 0, got " + std::to_string(*dense));
    m.ffn_hidden = *dense;
  } else if (c.moe.first_dense_layers > 0) {
    r.fail_field("dense_intermediate_size", "is missing (moe_layer_freq names dense layers)");
  } else {
    m.ffn_hidden = c.moe.expert_ffn;
  }

  // Special ids: config.json, else tokenizer.json's added tokens, else the official ids.
  if (auto id = r.optional_token_id("mask_token_id"))
    m.mask_id = static_cast<int32_t>(*id);
  else if (auto added = find_added_token(ckpt.dir(), {"<|mask|>"}))
    m.mask_id = static_cast<int32_t>(*added);
  else if (kOfficialMaskId < m.vocab_size)
    m.mask_id = static_cast<int32_t>(kOfficialMaskId);
  else
    r.fail_field("mask_token_id", "is missing (LLaDA-MoE needs the [MASK] id to denoise)");
  if (m.mask_id < 0) r.fail_field("mask_token_id", "must be >= 0");
  m.eos_id = static_cast<int32_t>(r.optional_token_id("eos_token_id").value_or(-1));
  m.pad_id = static_cast<int32_t>(r.optional_token_id("pad_token_id").value_or(m.eos_id));
  m.bos_id = static_cast<int32_t>(r.optional_token_id("bos_token_id").value_or(-1));
  m.eot_id = static_cast<int32_t>(find_added_token(ckpt.dir(), {"<|role_end|>"}).value_or(-1));
  check_special_ids_in_vocab(r, m);
  m.shift_logits = false;
  c.tied_head = r.optional_bool("tie_word_embeddings").value_or(false);
  return c;
}

}  // namespace

const Family& llada_moe_family() {
  static const Family kFamily = {
      .name = "llada-moe",
      .hf_architectures = {"LLaDAMoEModelLM", "LLaDAMoEModel"},
      .model_types = {"lladamoe"},
      .parse_hf_config = &parse_config,
      // llama.cpp's order: its converter walks the safetensors names sorted (then the stacked experts where
      // the last one is read); whole-model tensors come first here, then each layer's.
      .tensors =
          {
              {TensorRole::kHead, "lm_head.weight", "output.weight"},
              {TensorRole::kEmbedding, "model.embed_tokens.weight", "token_embd.weight"},
              {TensorRole::kOutputNorm, "model.norm.weight", "output_norm.weight"},
              {TensorRole::kAttnNorm, "model.layers.{}.input_layernorm.weight", "blk.{}.attn_norm.weight"},
              {TensorRole::kDown, "model.layers.{}.mlp.down_proj.weight", "blk.{}.ffn_down.weight"},
              {TensorRole::kExpertDown, "model.layers.{}.mlp.experts.{e}.down_proj.weight",
               "blk.{}.ffn_down_exps.weight"},
              {TensorRole::kExpertGate, "model.layers.{}.mlp.experts.{e}.gate_proj.weight",
               "blk.{}.ffn_gate_exps.weight"},
              {TensorRole::kExpertUp, "model.layers.{}.mlp.experts.{e}.up_proj.weight",
               "blk.{}.ffn_up_exps.weight"},
              {TensorRole::kRouter, "model.layers.{}.mlp.gate.weight", "blk.{}.ffn_gate_inp.weight"},
              {TensorRole::kGate, "model.layers.{}.mlp.gate_proj.weight", "blk.{}.ffn_gate.weight"},
              {TensorRole::kUp, "model.layers.{}.mlp.up_proj.weight", "blk.{}.ffn_up.weight"},
              {TensorRole::kFfnNorm, "model.layers.{}.post_attention_layernorm.weight",
               "blk.{}.ffn_norm.weight"},
              {TensorRole::kKNorm, "model.layers.{}.self_attn.k_norm.weight", "blk.{}.attn_k_norm.weight"},
              {TensorRole::kK, "model.layers.{}.self_attn.k_proj.weight", "blk.{}.attn_k.weight"},
              {TensorRole::kAttnOut, "model.layers.{}.self_attn.o_proj.weight", "blk.{}.attn_output.weight"},
              {TensorRole::kQNorm, "model.layers.{}.self_attn.q_norm.weight", "blk.{}.attn_q_norm.weight"},
              {TensorRole::kQ, "model.layers.{}.self_attn.q_proj.weight", "blk.{}.attn_q.weight"},
              {TensorRole::kV, "model.layers.{}.self_attn.v_proj.weight", "blk.{}.attn_v.weight"},
          },
      .shift_logits = false,
      .tied_head_may_be_stored = false,
      .gguf_rms_eps = 1e-5f,
      .default_mask_id = kOfficialMaskId,
      .eot_text = "<|role_end|>",
      .tokenizer_pre = "llada-moe",
      .add_bos = false,
      .gguf_block_size = 0,
      .mask_id_may_be_absent = false,
      .gguf_moe_gating = TransformerConfig::Moe::Gating::kSoftmax,
      .gguf_moe_normalize = false,
  };
  return kFamily;
}

}  // namespace dllm
