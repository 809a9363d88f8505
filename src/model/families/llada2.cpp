// LLaDA2.0 / LLaDA2.1 (inclusionAI/LLaDA2.x-mini and -flash): block-diffusion mixture-of-experts models on
// the Ling 2.0 (BailingMoeV2) layout. Fused QKV, per-head q/k RMSNorm before a partial RoPE
// (partial_rotary_factor of head_dim), the first first_k_dense_replace layers dense, the others a sigmoid
// router with an expert bias used only for the choice, group-limited top-k, a shared expert and a routed
// scaling factor. GGUF names are llama.cpp's bailingmoe2 ones. Settings the Transformer does not implement
// are rejected by name. The family description: see model/family.h.
#include <cmath>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace dllm {

namespace {

// The official generate()'s default ids (<|endoftext|>, <|mask|> of the 157184-token vocabulary); used when
// neither config.json nor tokenizer.json names them and the vocabulary holds them.
constexpr int64_t kOfficialEosId = 156892, kOfficialMaskId = 156895;

TransformerConfig parse_config(const Checkpoint& ckpt) {
  const auto& cfg = ckpt.config();
  ConfigReader r(cfg, ckpt.dir() + "/config.json");
  reject_unsupported_hf_settings(r, cfg, "LLaDA2", "block-causal full attention");
  if (r.optional_bool("use_qkv_bias").value_or(false))
    r.fail_field("use_qkv_bias", "= true is not supported (LLaDA2 checkpoints have no qkv bias)");
  if (r.optional_bool("use_bias").value_or(false))
    r.fail_field("use_bias", "= true is not supported (LLaDA2 checkpoints have no linear biases)");
  if (r.optional_bool("use_rmsnorm").value_or(true) == false)
    r.fail_field("use_rmsnorm", "= false is not supported (RMSNorm only)");
  if (r.optional_bool("norm_head").value_or(false))
    r.fail_field("norm_head", "= true is not supported (the head is a plain linear layer)");
  if (auto f = r.optional_string("score_function"); f && *f != "sigmoid")
    r.fail_field("score_function", "= \"" + *f + "\" is not supported (LLaDA2 routers use \"sigmoid\")");

  TransformerConfig c;
  ModelInfo& m = c.info;
  m.path = ckpt.dir();
  m.architecture = "llada2";
  read_standard_sizes(r, c);
  read_rope_theta_and_rms_eps(r, 1e-6, c);
  c.qk_norm = r.optional_bool("use_qk_norm").value_or(true);  // the config class's default; the files omit it
  const double partial = r.optional_number("partial_rotary_factor").value_or(1.0);
  if (!(partial > 0) || !(partial <= 1))
    r.fail_field("partial_rotary_factor", "must be in (0, 1], got " + std::to_string(partial));
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(m.head_dim) * partial);  // int(), as the reference
  if (c.rotary_dim <= 0 || c.rotary_dim % 2 != 0)
    r.fail_field("partial_rotary_factor", "gives a rotary dimension of " + std::to_string(c.rotary_dim) +
                                              ", which must be even and > 0");
  m.block_size = 32;  // the official generate()'s block_length

  if (auto experts = r.optional_int("num_experts"); experts && *experts > 0) {
    TransformerConfig::Moe& moe = c.moe;
    moe.experts = *experts;
    moe.used = r.positive_int("num_experts_per_tok");
    moe.expert_ffn = r.positive_int("moe_intermediate_size");
    moe.shared = r.optional_int("num_shared_experts").value_or(0);
    moe.first_dense_layers = r.optional_int("first_k_dense_replace").value_or(0);
    moe.groups = r.optional_int("n_group").value_or(1);
    moe.groups_used = r.optional_int("topk_group").value_or(moe.groups);
    moe.gating = TransformerConfig::Moe::Gating::kSigmoid;
    moe.expert_bias = r.optional_bool("moe_router_enable_expert_bias").value_or(true);
    moe.normalize = true;  // the sigmoid router normalises whenever used > 1, whatever norm_topk_prob says
    const double scale = r.optional_number("routed_scaling_factor").value_or(1.0);
    if (!(scale > 0) || !std::isfinite(scale))
      r.fail_field("routed_scaling_factor", "must be > 0 and finite");
    moe.routed_scale = static_cast<float>(scale);
    if (moe.used > moe.experts)
      r.fail_field("num_experts_per_tok",
                   "= " + std::to_string(moe.used) + " exceeds num_experts = " + std::to_string(moe.experts));
    if (moe.shared < 0) r.fail_field("num_shared_experts", "must be >= 0");
    if (moe.first_dense_layers < 0) r.fail_field("first_k_dense_replace", "must be >= 0");
    if (moe.groups <= 0 || moe.experts % moe.groups != 0)
      r.fail_field("n_group", "= " + std::to_string(moe.groups) +
                                  " must divide num_experts = " + std::to_string(moe.experts));
    if (moe.groups_used <= 0 || moe.groups_used > moe.groups)
      r.fail_field("topk_group", "= " + std::to_string(moe.groups_used) + " must be in [1, n_group]");
    if (moe.groups > 1 && moe.experts / moe.groups < 2)
      r.fail_field("n_group", "leaves fewer than 2 experts per group (a group is scored by its best two)");
    if (moe.used > moe.groups_used * (moe.experts / moe.groups))
      r.fail_field("num_experts_per_tok", "exceeds the experts of the topk_group chosen groups");
    m.n_experts = moe.experts;
    m.n_experts_used = moe.used;
  }

  // Special ids: config.json, else tokenizer.json's added tokens, else the official generate()'s defaults.
  auto pick = [&](const char* field, const char* text, int64_t official) -> int32_t {
    if (auto id = r.optional_token_id(field)) return static_cast<int32_t>(*id);
    if (auto id = find_added_token(ckpt.dir(), {text})) return static_cast<int32_t>(*id);
    return official < m.vocab_size ? static_cast<int32_t>(official) : -1;
  };
  m.mask_id = pick("mask_token_id", "<|mask|>", kOfficialMaskId);
  m.eos_id = pick("eos_token_id", "<|endoftext|>", kOfficialEosId);
  m.pad_id = static_cast<int32_t>(r.optional_token_id("pad_token_id").value_or(m.eos_id));
  m.bos_id = static_cast<int32_t>(r.optional_token_id("bos_token_id").value_or(-1));
  m.eot_id = static_cast<int32_t>(find_added_token(ckpt.dir(), {"<|role_end|>"}).value_or(-1));
  check_special_ids_in_vocab(r, m);
  c.tied_head = r.optional_bool("tie_word_embeddings").value_or(false);
  return c;
}

}  // namespace

const Family& llada2_family() {
  static const Family kFamily = {
      .name = "llada2",
      .hf_architectures = {"LLaDA2MoeModelLM"},
      .model_types = {"llada2_moe"},
      .parse_hf_config = &parse_config,
      .tensors =
          {
              {TensorRole::kEmbedding, "model.word_embeddings.weight", "token_embd.weight"},
              {TensorRole::kOutputNorm, "model.norm.weight", "output_norm.weight"},
              {TensorRole::kHead, "lm_head.weight", "output.weight"},
              {TensorRole::kAttnNorm, "model.layers.{}.input_layernorm.weight", "blk.{}.attn_norm.weight"},
              {TensorRole::kQKV, "model.layers.{}.attention.query_key_value.weight",
               "blk.{}.attn_qkv.weight"},
              {TensorRole::kQNorm, "model.layers.{}.attention.query_layernorm.weight",
               "blk.{}.attn_q_norm.weight"},
              {TensorRole::kKNorm, "model.layers.{}.attention.key_layernorm.weight",
               "blk.{}.attn_k_norm.weight"},
              {TensorRole::kAttnOut, "model.layers.{}.attention.dense.weight", "blk.{}.attn_output.weight"},
              {TensorRole::kFfnNorm, "model.layers.{}.post_attention_layernorm.weight",
               "blk.{}.ffn_norm.weight"},
              {TensorRole::kGate, "model.layers.{}.mlp.gate_proj.weight", "blk.{}.ffn_gate.weight"},
              {TensorRole::kUp, "model.layers.{}.mlp.up_proj.weight", "blk.{}.ffn_up.weight"},
              {TensorRole::kDown, "model.layers.{}.mlp.down_proj.weight", "blk.{}.ffn_down.weight"},
              {TensorRole::kRouter, "model.layers.{}.mlp.gate.weight", "blk.{}.ffn_gate_inp.weight"},
              {TensorRole::kExpertBias, "model.layers.{}.mlp.gate.expert_bias", "blk.{}.exp_probs_b.bias"},
              {TensorRole::kExpertGate, "model.layers.{}.mlp.experts.{e}.gate_proj.weight",
               "blk.{}.ffn_gate_exps.weight"},
              {TensorRole::kExpertUp, "model.layers.{}.mlp.experts.{e}.up_proj.weight",
               "blk.{}.ffn_up_exps.weight"},
              {TensorRole::kExpertDown, "model.layers.{}.mlp.experts.{e}.down_proj.weight",
               "blk.{}.ffn_down_exps.weight"},
              {TensorRole::kSharedGate, "model.layers.{}.mlp.shared_experts.gate_proj.weight",
               "blk.{}.ffn_gate_shexp.weight"},
              {TensorRole::kSharedUp, "model.layers.{}.mlp.shared_experts.up_proj.weight",
               "blk.{}.ffn_up_shexp.weight"},
              {TensorRole::kSharedDown, "model.layers.{}.mlp.shared_experts.down_proj.weight",
               "blk.{}.ffn_down_shexp.weight"},
          },
      .shift_logits = false,
      .tied_head_may_be_stored = false,
      .gguf_rms_eps = 1e-6f,
      .default_mask_id = kOfficialMaskId,
      .eot_text = "<|role_end|>",
      .tokenizer_pre = "bailingmoe2",
      .add_bos = false,
      .gguf_block_size = 32,
      .mask_id_may_be_absent = true,
  };
  return kFamily;
}

}  // namespace dllm
