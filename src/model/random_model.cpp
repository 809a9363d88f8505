#include "model/random_model.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "io/checkpoint.h"
#include "kernels/linear.h"
#include "kernels/quant/linear_ggml.h"
#include "kernels/quant/linear_packed.h"
#include "kernels/quant/linear_q8.h"
#include "model/family.h"
#include "model/precision.h"

namespace dllm {

// The sizes of released checkpoints, as their config.json files give them (LLaDA2: inclusionAI/dFactory's
// llada2_mini config.json; SDAR: the Qwen3-4B / Qwen3-8B / Qwen3-30B-A3B sizes of SDAR-4B/8B/30B-A3B-Chat;
// LLaDA-MoE: inclusionAI/LLaDA-MoE-7B-A1B-Instruct, moe_layer_freq given as 1 so that --layers may cut it).
const std::vector<ModelShape>& known_shapes() {
  static const std::vector<ModelShape> kShapes = {
      {"llada-8b", "llada",
       R"({"d_model": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 32, "mlp_hidden_size": 12288,
           "vocab_size": 126464, "rope_theta": 500000.0, "mask_token_id": 126336, "max_sequence_length": 4096})"},
      {"dream-7b", "dream",
       R"({"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
           "intermediate_size": 18944, "vocab_size": 152064, "rope_theta": 1000000.0, "mask_token_id": 151666,
           "eos_token_id": 151643, "max_position_embeddings": 131072})"},
      {"llada-1b", "llada",
       R"({"d_model": 2048, "n_layers": 16, "n_heads": 16, "n_kv_heads": 16, "mlp_hidden_size": 5632,
           "vocab_size": 126464, "rope_theta": 500000.0, "mask_token_id": 126336})"},
      {"llada-tiny", "llada",
       R"({"d_model": 128, "n_layers": 3, "n_heads": 4, "n_kv_heads": 4, "mlp_hidden_size": 384,
           "vocab_size": 512, "mask_token_id": 511})"},
      {"llada2-mini", "llada2",
       R"({"num_hidden_layers": 20, "hidden_size": 2048, "intermediate_size": 5120, "first_k_dense_replace": 1,
           "hidden_act": "silu", "max_position_embeddings": 16384, "model_type": "llada2_moe",
           "moe_intermediate_size": 512, "norm_topk_prob": true, "num_experts_per_tok": 8, "norm_head": false,
           "num_attention_heads": 16, "num_experts": 256, "num_key_value_heads": 4, "rope_theta": 600000,
           "rope_scaling": null, "tie_word_embeddings": false, "use_bias": false, "use_rmsnorm": true,
           "rms_norm_eps": 1e-06, "head_dim": 128, "num_shared_experts": 1, "use_qkv_bias": false,
           "vocab_size": 157184, "rotary_dim": 64, "moe_router_enable_expert_bias": true,
           "routed_scaling_factor": 2.5, "n_group": 8, "topk_group": 4, "score_function": "sigmoid",
           "pad_token_id": 156892, "partial_rotary_factor": 0.5, "use_sliding_window": false})"},
      {"llada2-tiny", "llada2",
       R"({"num_hidden_layers": 3, "hidden_size": 128, "intermediate_size": 256, "first_k_dense_replace": 1,
           "moe_intermediate_size": 64, "num_experts_per_tok": 2, "num_attention_heads": 4, "num_experts": 8,
           "num_key_value_heads": 2, "head_dim": 32, "num_shared_experts": 1, "vocab_size": 512,
           "n_group": 2, "topk_group": 1, "routed_scaling_factor": 2.5, "partial_rotary_factor": 0.5,
           "rope_theta": 600000, "mask_token_id": 503, "eos_token_id": 500})"},
      {"sdar-4b", "sdar",
       R"({"hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rope_theta": 1000000,
           "rms_norm_eps": 1e-06, "tie_word_embeddings": true, "block_size": 4, "mask_token_id": 151669,
           "bos_token_id": 151643, "eos_token_id": 151643, "max_position_embeddings": 32768})"},
      {"sdar-8b", "sdar",
       R"({"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rope_theta": 1000000,
           "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "block_size": 4, "mask_token_id": 151669,
           "bos_token_id": 151643, "eos_token_id": 151643, "max_position_embeddings": 32768})"},
      {"sdar-30b-a3b", "sdar",
       R"({"architectures": ["SDARMoeForCausalLM"], "model_type": "sdar_moe", "hidden_size": 2048,
           "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 48,
           "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
           "num_experts_per_tok": 8, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [],
           "vocab_size": 151936, "rope_theta": 1000000, "rms_norm_eps": 1e-06, "tie_word_embeddings": false,
           "block_size": 4, "mask_token_id": 151669, "bos_token_id": 151643, "eos_token_id": 151643,
           "max_position_embeddings": 32768})"},
      // DiffusionGemma 26B-A4B (google's diffusion-gemma instruction model): 30 layers (five sliding, one
      // full), hidden 2816, 16 heads, 8 / 2 kv heads of 256 / 512, dense MLP 2112 beside 128 experts of 704
      // (top 8), vocab 262144, canvas 256. The sizes llama.cpp's loader prints for the released GGUF
      // (block_count 30, embedding 2816, feed_forward 2112, 16 heads, kv [8 x5, 2]) and Gemma 4 26B-A4B's
      // config.json for the rest; the released config.json itself was not readable here
      // (docs/diffusion-gemma.md). Benchmarked from a random GGUF file (convert/random_gguf.h), not from
      // make_random_model.
      {"diffusion-gemma-26b-a4b", "diffusion_gemma",
       R"({"architectures": ["DiffusionGemmaForBlockDiffusion"], "model_type": "diffusion_gemma",
           "canvas_length": 256, "eos_token_id": [1, 106],
           "text_config": {"hidden_size": 2816, "num_hidden_layers": 30, "num_attention_heads": 16,
             "num_key_value_heads": 8, "num_global_key_value_heads": 2, "head_dim": 256, "global_head_dim": 512,
             "intermediate_size": 2112, "moe_intermediate_size": 704, "num_experts": 128, "top_k_experts": 8,
             "vocab_size": 262144, "sliding_window": 1024, "max_position_embeddings": 262144,
             "rms_norm_eps": 1e-06, "final_logit_softcapping": 30.0, "hidden_activation": "gelu_pytorch_tanh",
             "use_bidirectional_attention": "vision", "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
             "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                                    "rope_type": "proportional"},
                                 "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}}})"},
      {"diffusion-gemma-tiny", "diffusion_gemma",
       R"({"model_type": "diffusion_gemma", "canvas_length": 16, "eos_token_id": [1],
           "text_config": {"hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "num_global_key_value_heads": 1, "head_dim": 64, "global_head_dim": 128,
             "intermediate_size": 256, "moe_intermediate_size": 256, "num_experts": 8, "top_k_experts": 2,
             "vocab_size": 1024, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"],
             "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                                    "rope_type": "proportional"}}}})"},
      // Autoregressive models (dllm bench --ar), their real config.json sizes.
      {"qwen2.5-0.5b", "qwen2",
       R"({"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
           "num_key_value_heads": 2, "vocab_size": 151936, "rope_theta": 1000000, "rms_norm_eps": 1e-06,
           "tie_word_embeddings": true, "bos_token_id": 151643, "eos_token_id": 151645,
           "max_position_embeddings": 32768})"},
      {"qwen2.5-7b", "qwen2",
       R"({"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
           "num_key_value_heads": 4, "vocab_size": 152064, "rope_theta": 1000000, "rms_norm_eps": 1e-06,
           "tie_word_embeddings": false, "bos_token_id": 151643, "eos_token_id": 151645,
           "max_position_embeddings": 32768})"},
      {"qwen3-8b", "qwen3",
       R"({"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rope_theta": 1000000,
           "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "bos_token_id": 151643, "eos_token_id": 151645,
           "max_position_embeddings": 40960})"},
      {"llama-3.2-1b", "llama",
       R"({"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256, "rope_theta": 500000,
           "rms_norm_eps": 1e-05, "tie_word_embeddings": true, "bos_token_id": 128000, "eos_token_id": 128009,
           "max_position_embeddings": 131072, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0,
           "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}})"},
      {"llada-moe-7b-a1b", "llada-moe",
       R"({"architectures": ["LLaDAMoEModelLM"], "model_type": "lladamoe", "hidden_size": 2048,
           "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 16,
           "dense_intermediate_size": 8192, "expert_intermediate_size": 1024, "num_experts": 64,
           "num_experts_per_tok": 8, "moe_layer_freq": 1, "moe_router_score_function": "softmax",
           "norm_topk_prob": false, "qk_layernorm": true, "vocab_size": 157184, "rope_theta": 50000,
           "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "mask_token_id": 156895,
           "eos_token_id": 156892, "pad_token_id": 156892, "max_position_embeddings": 8192})"},
      {"llada-moe-tiny", "llada-moe",
       R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "expert_intermediate_size": 32,
           "num_experts": 8, "num_experts_per_tok": 2, "moe_layer_freq": [1, 1], "vocab_size": 512,
           "rope_theta": 50000, "mask_token_id": 503, "eos_token_id": 500})"},
  };
  return kShapes;
}

std::string shape_names() {
  std::string names;
  for (const auto& s : known_shapes()) names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

const ModelShape& find_shape(const std::string& name) {
  std::string known;
  for (const auto& s : known_shapes()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  fail("unknown model shape '", name, "' (known: ", known, ")");
}

namespace {

// Uniform with the given standard deviation: billions of values for 8B shapes, so a cheap generator
// (xorshift).
std::vector<float> random_vector(std::mt19937_64& rng, size_t n, float stddev) {
  uint64_t state = rng() | 1;
  const float scale = stddev * 1.7320508f / 8388608.0f;  // uniform(-a, a) has std a/sqrt(3)
  std::vector<float> v(n);
  for (auto& x : v) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    x = static_cast<float>(static_cast<int32_t>(state >> 40) - 8388608) * scale;
  }
  return v;
}

}  // namespace

RandomWeights parse_random_weights(const std::string& name) {
  if (name == "auto" || name == "f32") return RandomWeights::kPlain;
  if (name == "q8") return RandomWeights::kQ8;
  if (name == "q8_0") return RandomWeights::kQ8_0;
  if (name == "q4_k") return RandomWeights::kQ4_K;
  if (name == "q6_k") return RandomWeights::kQ6_K;
  if (name == "q4_0") return RandomWeights::kQ4_0;
  fail("--weights: '", name, "' is not one of auto, f32, q8, q8_0, q4_0, q4_k, q6_k for a random model");
}

std::shared_ptr<Model> make_random_model(const ModelShape& shape, int64_t n_layers, Precision precision,
                                         uint64_t seed, RandomWeights weights, ExpertPacking experts,
                                         BackendKind backend) {
  const bool pack_experts = experts == ExpertPacking::kAtLoad;
  const bool device = backend != BackendKind::kCpu;
  const Family* family = find_family(shape.family);
  if (!family) fail("model shape '", shape.name, "': unknown family '", shape.family, "'");
  nlohmann::json config = nlohmann::json::parse(shape.config);
  const Checkpoint described("shape " + shape.name, config, nlohmann::json::object());
  TransformerConfig c = family->parse_hf_config(described);
  ModelInfo& m = c.info;
  m.path = "random:" + shape.name;
  if (n_layers > 0) m.n_layers = n_layers;
  m.max_seq_len = std::max<int64_t>(m.max_seq_len, 1 << 16);
  if (m.mask_id < 0) m.mask_id = static_cast<int32_t>(m.vocab_size - 1);
  const ComputeType ct = precision == Precision::kF32   ? ComputeType::kF32
                         : precision == Precision::kF16 ? ComputeType::kF16
                                                        : ComputeType::kBF16;
  m.precision = precision_of(ct);
  m.precision_reason = precision == Precision::kAuto
                           ? "auto: random weights held as bf16, as a real checkpoint"
                           : std::string("requested (--dtype ") + precision_name(precision) + ")";
  if (weights == RandomWeights::kQ8) m.precision_reason += "; matrices in 8 bits (LinearQ8)";
  if (weights == RandomWeights::kQ8_0)
    m.precision_reason += "; matrices as Q8_0 blocks (packed in 16-row panels)";
  if (weights == RandomWeights::kQ4_K)
    m.precision_reason += "; matrices as Q4_K blocks (packed in 16-row panels)";
  if (weights == RandomWeights::kQ6_K) m.precision_reason += "; matrices as Q6_K blocks, multiplied in place";
  if (weights == RandomWeights::kQ4_0)
    m.precision_reason += "; matrices as Q4_0 blocks (packed in 16-row panels)";

  std::mt19937_64 rng(seed);
  TransformerWeights w;
  auto numel = [&](TensorRole role) {
    int64_t n = 1;
    for (int64_t s : tensor_shape(role, c)) n *= s;
    return static_cast<size_t>(n);
  };
  // A matrix from random f32 rows, held as `weights` says and as the GGUF loader would hold it (the router
  // stays f32; Q8_0 / Q4_0 packed into panels except experts, which stay in place).
  PrecisionTally tally;
  auto matrix_untallied = [&](const float* rows, int64_t out, int64_t in, bool keep_f32,
                              bool expert = false) -> MatMul {
    if (!keep_f32) {
      if (weights == RandomWeights::kQ8 && in % 32 == 0) return quant::LinearQ8::from_f32(rows, out, in);
      for (const auto& [want, type] : {std::pair{RandomWeights::kQ8_0, GgmlType::kQ8_0},
                                       std::pair{RandomWeights::kQ4_0, GgmlType::kQ4_0},
                                       std::pair{RandomWeights::kQ4_K, GgmlType::kQ4_K}})
        if (weights == want && (!expert || pack_experts) && !(device && type != GgmlType::kQ4_0) &&
            quant::LinearPacked::can_pack(type, out, in))
          return quant::LinearPacked::quantize_f32(type, rows, out, in);
      if (weights == RandomWeights::kQ8_0 && in % 32 == 0)
        return quant::LinearGgml::quantize_f32(GgmlType::kQ8_0, rows, out, in);
      if (weights == RandomWeights::kQ4_K && in % 256 == 0)
        return quant::LinearGgml::quantize_f32(GgmlType::kQ4_K, rows, out, in);
      if (weights == RandomWeights::kQ6_K && in % 256 == 0)
        return quant::LinearGgml::quantize_f32(GgmlType::kQ6_K, rows, out, in);
      if (weights == RandomWeights::kQ4_0 && in % 32 == 0)
        return quant::LinearGgml::quantize_f32(GgmlType::kQ4_0, rows, out, in);
    }
    return Linear(rows, DType::kF32, out, in, keep_f32 ? ComputeType::kF32 : ct);
  };
  // The random rows stand for an F32 checkpoint's.
  auto matrix = [&](const float* rows, int64_t out, int64_t in, bool keep_f32, bool expert = false) {
    MatMul m = matrix_untallied(rows, out, in, keep_f32, expert);
    tally.add("F32", m);
    return m;
  };
  auto emb = random_vector(rng, numel(TensorRole::kEmbedding), 0.02f);
  w.owned_embedding_data = std::make_shared<std::vector<uint8_t>>(emb.size() * 4);
  std::memcpy(w.owned_embedding_data->data(), emb.data(), emb.size() * 4);
  w.owned_embedding = std::make_shared<TensorView>();
  w.owned_embedding->name = "embedding";
  w.owned_embedding->dtype = DType::kF32;
  w.owned_embedding->shape = {m.vocab_size, m.d_model};
  w.owned_embedding->data = w.owned_embedding_data->data();
  w.owned_embedding->nbytes = w.owned_embedding_data->size();
  w.embedding = w.owned_embedding.get();
  for (int64_t i = 0; i < m.n_layers; ++i) {
    LayerWeights& L = w.layers.emplace_back(make_layer(c, i));
    for (const TensorSpec& spec : family->tensors) {
      if (!is_per_layer(spec.role) || !tensor_present(spec, c, i)) continue;
      const auto dims = tensor_shape(spec.role, c);
      if (spec.role == TensorRole::kQKV) {
        const auto v = random_vector(rng, numel(spec.role), 0.02f);
        const auto ranges = split_qkv_rows(c);
        MatMul* parts[3] = {&L.q, &L.k, &L.v};
        for (int p = 0; p < 3; ++p)
          *parts[p] = matrix(v.data() + ranges[p].first * dims[1], ranges[p].count, dims[1], false);
      } else if (std::vector<MatMul>* experts = layer_experts(L, spec.role)) {
        for (auto& e : *experts) {
          const auto v = random_vector(rng, numel(spec.role), 0.02f);
          e = matrix(v.data(), dims[0], dims[1], false, /*expert=*/true);
        }
      } else if (MatMul* mat = layer_matrix(L, spec.role)) {
        const auto v = random_vector(rng, numel(spec.role), 0.02f);
        *mat = matrix(v.data(), dims[0], dims[1], spec.role == TensorRole::kRouter);
      } else if (spec.role == TensorRole::kAttnNorm || spec.role == TensorRole::kFfnNorm ||
                 spec.role == TensorRole::kQNorm || spec.role == TensorRole::kKNorm) {
        layer_vector(L, spec.role)->assign(static_cast<size_t>(dims[0]), 1.0f);
      } else {
        *layer_vector(L, spec.role) = random_vector(rng, numel(spec.role), 0.02f);
      }
    }
  }
  if (experts == ExpertPacking::kOnFirstUse)  // the blocks are owned: nothing mapped to release
    for (LayerWeights& L : w.layers)
      if (L.moe) pack_experts_on_first_use(*L.moe);
  w.final_norm.assign(static_cast<size_t>(m.d_model), 1.0f);
  if (c.tied_head) {
    w.head = matrix(emb.data(), m.vocab_size, m.d_model, false);
  } else {
    const auto head = random_vector(rng, numel(TensorRole::kHead), 0.02f);
    w.head = matrix(head.data(), m.vocab_size, m.d_model, false);
  }
  m.n_params = count_params(*family, c);
  m.precision_by_type = tally.result();
  return std::make_shared<Transformer>(std::move(c), nullptr, std::move(w));
}

}  // namespace dllm
