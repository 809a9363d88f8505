// What one model family is, in one place: how its config.json is read (with every setting the engine does not
// run rejected by name) and one tensor table (Hugging Face name, GGUF name, role, GGUF transform). The HF
// loader, the GGUF loader, `dllm convert`, the random models of `dllm bench` and the parameter count are all
// driven by it, so they cannot drift apart. A family is one file under model/families/ plus one line in
// registry.cpp.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "model/config_reader.h"
#include "model/transformer.h"

namespace dllm {

// What a tensor is to the shared Transformer; its shape follows from the role and the config (tensor_shape).
enum class TensorRole {
  kEmbedding,   // (vocab, d)
  kOutputNorm,  // (d)
  kHead,        // (vocab, d); absent when TransformerConfig::tied_head
  kAttnNorm,    // (d), per layer from here on
  kQ,           // (n_heads * head_dim, d)
  kK,           // (n_kv_heads * head_dim, d)
  kV,           // (n_kv_heads * head_dim, d)
  kQBias,       // (n_heads * head_dim)
  kKBias,       // (n_kv_heads * head_dim)
  kVBias,       // (n_kv_heads * head_dim)
  kAttnOut,     // (d, n_heads * head_dim)
  kFfnNorm,     // (d)
  kGate,        // (ffn_hidden, d); dense layers
  kUp,          // (ffn_hidden, d)
  kDown,        // (d, ffn_hidden)
  kQKV,     // (n_heads*hd + 2*n_kv_heads*hd, d): q, k and v rows fused (LLaDA2); split into kQ/kK/kV at load
  kQNorm,   // (head_dim), with qk_norm
  kKNorm,   // (head_dim)
  kRouter,  // (experts, d); mixture-of-experts layers from here on
  kExpertBias,  // (experts), with moe.expert_bias
  kExpertGate,  // (expert_ffn, d) per expert: "{e}" in the HF name; one (experts, expert_ffn, d) tensor in
                // GGUF
  kExpertUp,    // (expert_ffn, d) per expert
  kExpertDown,  // (d, expert_ffn) per expert
  kSharedGate,  // (shared * expert_ffn, d), with moe.shared > 0
  kSharedUp,    // (shared * expert_ffn, d)
  kSharedDown,  // (d, shared * expert_ffn)
};

bool is_per_layer(TensorRole role);
bool is_matrix(TensorRole role);
bool is_expert(TensorRole role);  // one tensor per expert in HF, stacked in GGUF

// How the GGUF copy of a tensor differs from the Hugging Face one.
enum class GgufTransform {
  kNone,
  // llama.cpp runs LLaDA with adjacent-pair RoPE, so its converter stores row h*hd + 2j + t of each head
  // where HF has row h*hd + t*hd/2 + j (W.reshape(heads, 2, hd/2, d).swapaxes(1, 2)); this engine rotates
  // halves, as HF.
  kRopePairRows,
};

struct TensorSpec {
  TensorRole role;
  std::string hf;    // Hugging Face name; "{}" stands for the layer index
  std::string gguf;  // llama.cpp's name; "{}" likewise
  GgufTransform gguf_transform = GgufTransform::kNone;
};

struct Family {
  std::string name;                           // registry and GGUF general.architecture name: "llada"
  std::vector<std::string> hf_architectures;  // config.json "architectures" entries
  std::vector<std::string> model_types;       // config.json "model_type" values
  // config.json (+ generation_config.json, tokenizer.json's added tokens) -> the Transformer's config. Throws
  // naming the file and field for anything the Transformer does not implement; the loader and `dllm convert`
  // both call it, so convert refuses what the loader refuses.
  TransformerConfig (*parse_hf_config)(const Checkpoint& checkpoint);
  std::vector<TensorSpec> tensors;  // every tensor of the family, in the order llama.cpp writes GGUF files
  bool shift_logits = false;        // position i predicted by the output at i-1 (Dream)
  // A tied checkpoint may still carry the head as a copy of the embedding (Qwen-style saves); it is then
  // taken and not used. Elsewhere a head beside a tied config is a contradiction, reported as an unexpected
  // tensor.
  bool tied_head_may_be_stored = false;
  // GGUF: what a file written by llama.cpp's converter leaves out and the family implies.
  float gguf_rms_eps = 1e-5f;              // attention.layer_norm_rms_epsilon when absent
  std::optional<int32_t> default_mask_id;  // tokenizer.ggml.mask_token_id when absent (LLaDA's 126336)
  std::string eot_text;                    // the end-of-turn token looked up by text in the vocabulary
  std::string tokenizer_pre =
      "default";                // tokenizer.ggml.pre for a pre-tokenizer regex llama.cpp has no name for
  bool add_bos = false;         // tokenizer.ggml.add_bos_token without a tokenizer.json to say
  int64_t gguf_block_size = 0;  // diffusion.block_length when absent (the block-diffusion families' default)
  // A file without tokenizer.ggml.mask_token_id whose default_mask_id is outside the vocabulary loads with
  // mask_id -1, as the config parser does (LLaDA2: GenerateParams::mask_id then names it); else an error.
  bool mask_id_may_be_absent = false;
  // An autoregressive family (qwen2, qwen3, llama): causal attention, no mask id, decoded token by token
  // (ModelInfo::autoregressive). Its GGUF may say attention.causal = true.
  bool autoregressive = false;
  // Vocabulary entries that end a generation besides EOS / EOT (llama.cpp's end-of-generation texts), looked
  // up by text in GGUF vocabularies and tokenizer.json.
  std::vector<std::string> eog_texts = {};
  // expert_gating_func / expert_weights_norm when absent: llama.cpp's graph hard-codes them for some
  // architectures (llada-moe: softmax, not renormalised), so its converter does not write them.
  TransformerConfig::Moe::Gating gguf_moe_gating = TransformerConfig::Moe::Gating::kSigmoid;
  bool gguf_moe_normalize = true;
};

// Registry (registry.cpp).
const std::vector<const Family*>& families();
const Family* find_family(const std::string& name);  // by registry name, nullptr when unknown
std::string family_names();                          // "llada, dream"
// Picks the family of a checkpoint; the error lists what config.json said and what is supported.
const Family& find_family(const Checkpoint& checkpoint);

// The family's entry for a role; throws when the table has none.
const TensorSpec& find_spec(const Family& family, TensorRole role);
// The tensor's expected shape (PyTorch order) under `config`; one expert's for the expert roles.
std::vector<int64_t> tensor_shape(TensorRole role, const TransformerConfig& config);
// Whether the family's table says the tensor exists under `config` in `layer` (-1 for the global tensors):
// the head only when not tied, biases with qkv_bias, dense MLP or experts as the layer is, ...
bool tensor_present(const TensorSpec& spec, const TransformerConfig& config, int64_t layer = -1);
// A table name with "{}" replaced by the layer index and "{e}" by the expert index.
std::string tensor_name(const std::string& pattern, int64_t layer, int64_t expert = -1);
// Heads whose rows a kRopePairRows transform reorders (0 = none).
int64_t rope_pair_heads(const TensorSpec& spec, const TransformerConfig& config);
// Rows of `heads` heads between HF order and llama.cpp's adjacent-pair order; rows move whole, so this works
// on any row layout (f32 rows, Q8_0 rows of blocks). `to_gguf` = HF -> GGUF, else back. `what` names the
// tensor.
std::vector<uint8_t> permute_rope_rows(const uint8_t* rows, size_t row_bytes, int64_t n_rows, int64_t heads,
                                       bool to_gguf, const std::string& what);
// The same into `out` (n_rows * row_bytes bytes, not overlapping `rows`).
void permute_rope_rows_into(const uint8_t* rows, size_t row_bytes, int64_t n_rows, int64_t heads,
                            bool to_gguf, const std::string& what, uint8_t* out);

// An empty layer with the slots its kind needs (the experts' MoeWeights on mixture-of-experts layers).
LayerWeights make_layer(const TransformerConfig& config, int64_t layer);
// Where a per-layer role's tensor goes in the Transformer's weights; nullptr when the role is of another kind
// (kQKV is split into q/k/v by the loaders: split_qkv_rows).
MatMul* layer_matrix(LayerWeights& layer, TensorRole role);
std::vector<float>* layer_vector(LayerWeights& layer, TensorRole role);
std::vector<MatMul>* layer_experts(LayerWeights& layer, TensorRole role);  // kExpert{Gate,Up,Down}
// Row ranges [first, first + count) of q, k and v in a fused kQKV tensor.
struct RowRange {
  int64_t first, count;
};
std::array<RowRange, 3> split_qkv_rows(const TransformerConfig& config);

// Parameters of a model of this family and config, counted from the table.
int64_t count_params(const Family& family, const TransformerConfig& config);

// The Hugging Face standard sizes (hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
// head_dim, intermediate_size, vocab_size, max_position_embeddings) into `config.info`, checked. A family
// whose dense MLP width has another name (or may be absent) passes ffn_key = nullptr and reads it itself.
void read_standard_sizes(const ConfigReader& r, TransformerConfig& config,
                         const char* ffn_key = "intermediate_size");

// The settings the Hugging Face-style families (Dream, SDAR, LLaDA2) share and the Transformer does not run,
// rejected by name: hidden_act other than silu ("<family> checkpoints use \"silu\""), use_sliding_window (the
// message names `attention`, e.g. "bidirectional full attention only"), a non-null rope_scaling.
void reject_unsupported_hf_settings(const ConfigReader& r, const nlohmann::json& cfg,
                                    const std::string& family, const std::string& attention);
// mask / eos / pad / bos ids that lie past the vocabulary, naming the config.json field.
void check_special_ids_in_vocab(const ConfigReader& r, const ModelInfo& m);

// config.json's rope_theta (default 10000) and rms_norm_eps (default `default_eps`) into `config`, checked as
// doubles so that a value outside float's range names the field instead of reaching the narrowing conversion.
void read_rope_theta_and_rms_eps(const ConfigReader& r, double default_eps, TransformerConfig& config);

// The Hugging Face causal-LM config.json (Qwen2ForCausalLM, Qwen3ForCausalLM, LlamaForCausalLM): the standard
// sizes, rope_theta / rms_norm_eps, tie_word_embeddings, and the special ids: bos / eos / pad from
// config.json, else generation_config.json; eog_ids = eos, every id of generation_config's eos_token_id list
// and the tokenizer.json added tokens named in `eog_texts` (eot_id the first of those found). `architecture`
// is the registry name; `label` names the family in messages.
TransformerConfig parse_causal_lm_config(const Checkpoint& ckpt, const std::string& architecture,
                                         double default_eps, const std::vector<std::string>& eog_texts);

// Special-token ids not in config.json, looked up by content in the directory's tokenizer.json added_tokens.
std::optional<int64_t> find_added_token(const std::string& model_dir,
                                        const std::vector<std::string>& contents);

}  // namespace dllm
