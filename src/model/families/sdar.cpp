// SDAR (JetAstra/SDAR-*-Chat, TraDo): block-diffusion models on the Qwen3 layout. Dense SwiGLU, GQA, per-head
// q/k RMSNorm before RoPE, no biases; generated block by block with block-causal attention (config.json
// block_size is the trained block length). Tensor names are Qwen3's, so llama.cpp's qwen3 GGUF names apply.
// SDAR-MoE (SDARMoeForCausalLM, SDAR-30B-A3B) is the same model on the Qwen3-MoE layout: a softmax router
// over all experts, top-k, the k weights renormalised when norm_topk_prob, no shared expert; the layers of
// mlp_only_layers dense. Its GGUF uses llama.cpp's qwen3moe names and keys under the same "sdar"
// architecture. Settings the Transformer does not implement are rejected by name. The family description: see
// model/family.h.
#include <algorithm>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace dllm {

namespace {

// SDAR-MoE by its model_type or architecture (then num_experts must be there), or by naming experts.
bool ckpt_is_moe(const nlohmann::json& cfg) {
  if (cfg.value("model_type", "") == "sdar_moe") return true;
  if (cfg.contains("architectures") && cfg["architectures"].is_array())
    for (const auto& a : cfg["architectures"])
      if (a == "SDARMoeForCausalLM") return true;
  return cfg.contains("num_experts") && !cfg["num_experts"].is_null() &&
         !(cfg["num_experts"].is_number_integer() && cfg["num_experts"].get<int64_t>() == 0);
}

// Qwen3MoeSparseMoeBlock's routing (softmax in f32, top-k, optional renormalisation) and its layer rule:
// layer i is dense when listed in mlp_only_layers, else MoE when (i + 1) % decoder_sparse_step == 0. The
// Transformer runs a leading run of dense layers, so mlp_only_layers must be {0, ..., k-1} and the step 1.
void read_moe(const ConfigReader& r, const nlohmann::json& cfg, TransformerConfig& c) {
  TransformerConfig::Moe& moe = c.moe;
  moe.experts = r.positive_int("num_experts");
  moe.used = r.positive_int("num_experts_per_tok");
  moe.expert_ffn = r.positive_int("moe_intermediate_size");
  if (moe.used > moe.experts)
    r.fail_field("num_experts_per_tok",
                 "= " + std::to_string(moe.used) + " exceeds num_experts = " + std::to_string(moe.experts));
  moe.gating = TransformerConfig::Moe::Gating::kSoftmax;
  moe.normalize = r.optional_bool("norm_topk_prob").value_or(false);  // Qwen3MoeConfig's default
  moe.shared = 0;
  moe.groups = moe.groups_used = 1;
  moe.expert_bias = false;
  moe.routed_scale = 1.0f;
  if (auto step = r.optional_int("decoder_sparse_step"); step && *step != 1)
    r.fail_field("decoder_sparse_step",
                 "= " + std::to_string(*step) +
                     " is not supported (every layer after the leading dense ones is MoE: 1)");
  std::vector<int64_t> dense;
  if (cfg.contains("mlp_only_layers") && !cfg["mlp_only_layers"].is_null()) {
    if (!cfg["mlp_only_layers"].is_array())
      r.fail_field("mlp_only_layers", "must be a list of layer indices");
    for (const auto& v : cfg["mlp_only_layers"]) {
      if (!v.is_number_integer()) r.fail_field("mlp_only_layers", "must be a list of layer indices");
      dense.push_back(v.get<int64_t>());
    }
  }
  std::sort(dense.begin(), dense.end());
  for (size_t i = 0; i < dense.size(); ++i)
    if (dense[i] != static_cast<int64_t>(i))
      r.fail_field("mlp_only_layers", "is supported only as the leading layers [0, 1, ..., k-1]");
  moe.first_dense_layers = static_cast<int64_t>(dense.size());
  if (moe.first_dense_layers > c.info.n_layers)
    r.fail_field("mlp_only_layers", "names layers past num_hidden_layers");
  if (auto shared = r.optional_int("shared_expert_intermediate_size"); shared && *shared > 0)
    r.fail_field("shared_expert_intermediate_size", "> 0 is not supported (SDAR-MoE has no shared expert)");
  c.info.n_experts = moe.experts;
  c.info.n_experts_used = moe.used;
}

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
  if (ckpt_is_moe(cfg)) read_moe(r, cfg, c);
  return c;
}

}  // namespace

const Family& sdar_family() {
  static const Family kFamily = {
      .name = "sdar",
      .hf_architectures = {"SDARForCausalLM", "SDARMoeForCausalLM"},
      .model_types = {"sdar", "sdar_moe"},
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
              {TensorRole::kRouter, "model.layers.{}.mlp.gate.weight", "blk.{}.ffn_gate_inp.weight"},
              {TensorRole::kExpertGate, "model.layers.{}.mlp.experts.{e}.gate_proj.weight",
               "blk.{}.ffn_gate_exps.weight"},
              {TensorRole::kExpertUp, "model.layers.{}.mlp.experts.{e}.up_proj.weight",
               "blk.{}.ffn_up_exps.weight"},
              {TensorRole::kExpertDown, "model.layers.{}.mlp.experts.{e}.down_proj.weight",
               "blk.{}.ffn_down_exps.weight"},
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
