// Llama 3.x and the models on its layout (LlamaForCausalLM: Meta-Llama-3, Llama-3.1/3.2, SmolLM2): an
// autoregressive model on the shared Transformer, run causally with a KV cache (ModelInfo::autoregressive).
// No biases, GQA, head may be tied. Llama 3.1's rope_scaling (rope_type "llama3") divides each rotated pair's
// frequency by a factor, which llama.cpp's converter stores as the rope_freqs tensor; other scalings are
// rejected by name. llama.cpp rotates adjacent pairs for llama, so its GGUF stores q and k rows permuted
// (GgufTransform::kRopePairRows, as for LLaDA). The family description: see model/family.h.
#include <cmath>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace dllm {

namespace {

const std::vector<std::string> kEogTexts = {"<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<|im_end|>",
                                            "<|endoftext|>"};

// transformers' _compute_llama3_parameters as llama.cpp's converter writes it
// (LlamaModel.generate_extra_tensors): factor 1 above the high-frequency wavelength, `factor` below the low
// one, a smooth blend between.
std::vector<float> llama3_freq_factors(const ConfigReader& r, const nlohmann::json& rs, int64_t head_dim,
                                       double theta) {
  ConfigReader s(rs, r.file() + ": rope_scaling");
  const double factor = s.positive_number("factor");
  const double low = s.optional_number("low_freq_factor").value_or(1.0);
  const double high = s.optional_number("high_freq_factor").value_or(4.0);
  const double old_context = s.optional_number("original_max_position_embeddings").value_or(8192.0);
  if (!(high > low) || !(low > 0))
    r.fail_field("rope_scaling", "needs 0 < low_freq_factor < high_freq_factor, got " + rs.dump());
  const double low_wavelen = old_context / low, high_wavelen = old_context / high;
  std::vector<float> factors;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const float freq =
        1.0f / std::pow(static_cast<float>(theta), static_cast<float>(i) / static_cast<float>(head_dim));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_context / wavelen - low) / (high - low);
      factors.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return factors;
}

TransformerConfig parse_config(const Checkpoint& ckpt) {
  const auto& cfg = ckpt.config();
  ConfigReader r(cfg, ckpt.dir() + "/config.json");
  if (auto act = r.optional_string("hidden_act"); act && *act != "silu")
    r.fail_field("hidden_act", "= \"" + *act + "\" is not supported (Llama checkpoints use \"silu\")");
  if (r.optional_bool("attention_bias").value_or(false))
    r.fail_field("attention_bias", "= true is not supported (Llama 3 checkpoints have no attention biases)");
  if (r.optional_bool("mlp_bias").value_or(false))
    r.fail_field("mlp_bias", "= true is not supported (Llama 3 checkpoints have no MLP biases)");
  if (auto tp = r.optional_int("pretraining_tp"); tp && *tp != 1)
    r.fail_field("pretraining_tp", "= " + std::to_string(*tp) + " is not supported (1 only)");
  TransformerConfig c = parse_causal_lm_config(ckpt, "llama", 1e-6, kEogTexts);
  if (cfg.contains("rope_scaling") && !cfg["rope_scaling"].is_null()) {
    const auto& rs = cfg["rope_scaling"];
    if (!rs.is_object()) r.fail_field("rope_scaling", "must be an object or null");
    const std::string type = rs.value("rope_type", rs.value("type", std::string()));
    if (type == "llama3")
      c.rope_freq_factors = llama3_freq_factors(r, rs, c.info.head_dim, c.rope_theta);
    else if (type != "default")
      r.fail_field("rope_scaling",
                   "= " + rs.dump() + " is not supported (plain RoPE or rope_type \"llama3\")");
  }
  return c;
}

}  // namespace

const Family& llama_family() {
  static const Family kFamily = {
      .name = "llama",
      .hf_architectures = {"LlamaForCausalLM"},
      .model_types = {"llama"},
      .parse_hf_config = &parse_config,
      .tensors =
          {
              {TensorRole::kEmbedding, "model.embed_tokens.weight", "token_embd.weight"},
              {TensorRole::kOutputNorm, "model.norm.weight", "output_norm.weight"},
              {TensorRole::kHead, "lm_head.weight", "output.weight"},
              {TensorRole::kAttnNorm, "model.layers.{}.input_layernorm.weight", "blk.{}.attn_norm.weight"},
              {TensorRole::kQ, "model.layers.{}.self_attn.q_proj.weight", "blk.{}.attn_q.weight",
               GgufTransform::kRopePairRows},
              {TensorRole::kK, "model.layers.{}.self_attn.k_proj.weight", "blk.{}.attn_k.weight",
               GgufTransform::kRopePairRows},
              {TensorRole::kV, "model.layers.{}.self_attn.v_proj.weight", "blk.{}.attn_v.weight"},
              {TensorRole::kAttnOut, "model.layers.{}.self_attn.o_proj.weight", "blk.{}.attn_output.weight"},
              {TensorRole::kFfnNorm, "model.layers.{}.post_attention_layernorm.weight",
               "blk.{}.ffn_norm.weight"},
              {TensorRole::kGate, "model.layers.{}.mlp.gate_proj.weight", "blk.{}.ffn_gate.weight"},
              {TensorRole::kUp, "model.layers.{}.mlp.up_proj.weight", "blk.{}.ffn_up.weight"},
              {TensorRole::kDown, "model.layers.{}.mlp.down_proj.weight", "blk.{}.ffn_down.weight"},
          },
      .tied_head_may_be_stored = true,
      .gguf_rms_eps = 1e-5f,
      .default_mask_id = std::nullopt,
      .eot_text = "<|eot_id|>",
      .tokenizer_pre = "llama-bpe",
      .add_bos = true,
      .autoregressive = true,
      .eog_texts = kEogTexts,
  };
  return kFamily;
}

}  // namespace dllm
