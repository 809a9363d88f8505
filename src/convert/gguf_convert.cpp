#include "convert/gguf_convert.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "convert/gguf_convert_parts.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/ggml_types.h"
#include "io/checkpoint.h"
#include "io/gguf_tokenizer_json.h"
#include "io/gguf_writer.h"
#include "io/json_file.h"
#include "kernels/quant/quant.h"
#include "model/diffusion_gemma.h"
#include "model/family.h"

namespace dllm {

namespace {

// llama_ftype of a file whose 2-D weights are `type` (general.file_type).
uint32_t file_type_of(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return 0;
    case GgmlType::kF16:
      return 1;
    case GgmlType::kQ4_0:
      return 2;
    case GgmlType::kQ8_0:
      return 7;
    case GgmlType::kQ4_K:
      return 15;  // Q4_K_M
    case GgmlType::kQ6_K:
      return 18;
    case GgmlType::kBF16:
      return 32;
  }
  return 0;
}

std::string type_name(GgmlType t) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(t));
  return info ? std::string(info->name) : "?";
}

int64_t block_of(GgmlType t) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(t));
  return info ? info->block_elems : 1;
}

// The type a 2-D weight with rows of `cols` gets.
GgmlType weight_type(GgmlType want, int64_t cols) {
  while (cols % block_of(want) != 0) {
    switch (want) {
      case GgmlType::kQ4_K:
        want = GgmlType::kQ4_0;
        break;
      default:
        want = GgmlType::kF16;
        break;
    }
  }
  return want;
}

struct Entry {
  std::string name;  // GGUF name
  // The HF tensor, or one per expert (kExpert*), stacked in this order: ggml dims [cols, rows, experts].
  std::vector<const TensorView*> sources;
  std::vector<int64_t> dims;  // ggml order
  GgmlType type;
  int64_t permute_heads = 0;  // GgufTransform::kRopePairRows: rows into llama.cpp's adjacent-pair order
};

using convert_parts::HfModel;

// The first non-empty pick(component) of a tokenizer.json component that may be a Sequence of components
// (listed under `list_key`), or pick's empty value.
template <class Pick>
auto first_component(const nlohmann::json& node, const char* list_key, Pick pick) -> decltype(pick(node)) {
  if (node.is_object() && node.value("type", "") == "Sequence")
    for (const auto& part : node.value(list_key, nlohmann::json::array()))
      if (auto r = pick(part); r != decltype(r){}) return r;
  return pick(node);
}

// The Split pre-tokenizer's regex of a tokenizer.json, or "".
std::string split_regex(const nlohmann::json& tok) {
  return first_component(tok.value("pre_tokenizer", nlohmann::json()), "pretokenizers",
                         [](const nlohmann::json& p) -> std::string {
                           if (p.is_object() && p.value("type", "") == "Split" && p.contains("pattern") &&
                               p["pattern"].contains("Regex"))
                             return p["pattern"]["Regex"].get<std::string>();
                           return "";
                         });
}

// Whether a tokenizer.json's post-processor puts a special token (BOS) before the text.
bool post_processor_adds_bos(const nlohmann::json& tok) {
  return first_component(
      tok.value("post_processor", nlohmann::json()), "processors", [](const nlohmann::json& p) {
        return p.is_object() && p.value("type", "") == "TemplateProcessing" && p.contains("single") &&
               !p["single"].empty() && p["single"][0].contains("SpecialToken");
      });
}

// tokenizer.ggml.* from tokenizer.json (byte-level BPE, as llama.cpp's gpt2 vocab), or, without one, the
// placeholder vocabulary of id literals "<i>" that the oracle files use (llama.cpp needs a vocabulary).
void write_tokenizer(GgufWriter& w, const std::string& dir, const HfModel& hf) {
  const ModelInfo& info = hf.config.info;
  const int64_t vocab = info.vocab_size;
  std::vector<std::string> tokens(static_cast<size_t>(vocab));
  std::vector<int32_t> types(tokens.size(), GgufTokenizer::kUserDefined);
  std::vector<std::string> merges;
  int64_t eot = -1;
  bool add_bos = hf.family->add_bos;  // the family's default, or what tokenizer.json's post-processor does
  const std::string tj = dir + "/tokenizer.json";
  if (file_exists(tj)) {
    const auto tok = read_json_file(tj);
    std::fill(types.begin(), types.end(), GgufTokenizer::kUnused);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = "[PAD" + std::to_string(i) + "]";
    const auto& model = tok.at("model");
    for (auto it = model.at("vocab").begin(); it != model.at("vocab").end(); ++it) {
      const int64_t id = it.value().get<int64_t>();
      if (id < 0 || id >= vocab)
        fail(tj, ": token '", it.key(), "' has id ", id, " outside the ", vocab, " embeddings");
      tokens[id] = it.key();
      types[id] = GgufTokenizer::kNormal;
    }
    if (tok.contains("added_tokens"))
      for (const auto& a : tok["added_tokens"]) {
        const int64_t id = a.at("id").get<int64_t>();
        if (id < 0 || id >= vocab) fail(tj, ": added token id ", id, " outside the ", vocab, " embeddings");
        tokens[id] = a.at("content").get<std::string>();
        types[id] = a.value("special", false) ? GgufTokenizer::kControl : GgufTokenizer::kUserDefined;
        if (tokens[id] == hf.family->eot_text) eot = id;
      }
    if (model.contains("merges"))
      for (const auto& mg : model["merges"])
        merges.push_back(mg.is_string() ? mg.get<std::string>()
                                        : mg.at(0).get<std::string>() + " " + mg.at(1).get<std::string>());
    w.set_string("tokenizer.ggml.model", "gpt2");
    // The pre-tokenizer by the name llama.cpp knows its regex by; a regex it has no name for gets the
    // family's usual one (llama.cpp, and dllm.cpp reading the file back, then split text slightly
    // differently).
    std::string pre = gguf_pre_name_for_regex(split_regex(tok));
    if (pre.empty()) pre = hf.family->tokenizer_pre;
    w.set_string("tokenizer.ggml.pre", pre);
    add_bos = post_processor_adds_bos(tok);
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = "<" + std::to_string(i) + ">";
    merges = {"< >"};  // llama.cpp requires the key, gguf-py cannot write an empty array
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "gpt-2");
  }
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_int32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", merges);
  auto id = [&](const char* key, int64_t v) {
    if (v >= 0 && v < vocab) w.set_uint32(std::string("tokenizer.ggml.") + key, static_cast<uint32_t>(v));
  };
  id("bos_token_id", info.bos_id);
  id("eos_token_id", info.eos_id);
  // The end of turn: the vocabulary's, else the one the config parser found (SDAR: generation_config's list).
  id("eot_token_id", eot >= 0 ? eot : info.eot_id);
  id("padding_token_id", info.pad_id);
  id("mask_token_id", info.mask_id);
  w.set_bool("tokenizer.ggml.add_bos_token", add_bos);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  const std::string tc = dir + "/tokenizer_config.json";
  std::string tmpl = "{% for message in messages %}{{ message['content'] }}{% endfor %}";
  if (file_exists(tc)) {
    const auto cfg = read_json_file(tc);
    if (cfg.contains("chat_template") && cfg["chat_template"].is_string()) tmpl = cfg["chat_template"];
  }
  w.set_string("tokenizer.chat_template", tmpl);
}

// Mixture-of-experts keys as llama.cpp's convert_hf_to_gguf.py writes them for bailingmoe2 (TextModel's
// expert keys, then BailingMoeV2Model's). The expert bias is not a key: its tensor (exp_probs_b) is present
// or not.
void write_moe_keys(GgufWriter& w, const std::string& a, const TransformerConfig& c) {
  const TransformerConfig::Moe& moe = c.moe;
  w.set_uint32(a + "expert_count", static_cast<uint32_t>(moe.experts));
  w.set_uint32(a + "expert_used_count", static_cast<uint32_t>(moe.used));
  w.set_uint32(a + "expert_group_count", static_cast<uint32_t>(moe.groups));
  w.set_uint32(a + "expert_group_used_count", static_cast<uint32_t>(moe.groups_used));
  // llama_expert_gating_func_type: 1 softmax, 2 sigmoid.
  w.set_uint32(a + "expert_gating_func", moe.gating == TransformerConfig::Moe::Gating::kSigmoid ? 2u : 1u);
  w.set_uint32(a + "leading_dense_block_count", static_cast<uint32_t>(moe.first_dense_layers));
  w.set_uint32(a + "expert_feed_forward_length", static_cast<uint32_t>(moe.expert_ffn));
  w.set_uint32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(moe.shared * moe.expert_ffn));
  w.set_float32(a + "expert_weights_scale", moe.routed_scale);
  w.set_uint32(a + "expert_shared_count", static_cast<uint32_t>(moe.shared));
  w.set_bool(a + "expert_weights_norm", moe.normalize);
}

}  // namespace

namespace convert_parts {
uint32_t file_type_of(GgmlType t) {
  return dllm::file_type_of(t);
}
std::string type_name(GgmlType t) {
  return dllm::type_name(t);
}
GgmlType weight_type(GgmlType want, int64_t cols) {
  return dllm::weight_type(want, cols);
}
void write_tokenizer(GgufWriter& w, const std::string& dir, const HfModel& hf) {
  dllm::write_tokenizer(w, dir, hf);
}
void write_tensors(const GgufWriter& w, const std::string& path, const std::vector<std::string>& names,
                   const std::vector<GgmlType>& types, const std::function<void(size_t, uint8_t*)>& fill,
                   const std::function<void(const ConvertProgress&)>& progress, ConvertResult& result) {
  ConvertProgress p;
  p.tensors = names.size();
  p.total_bytes = w.total_bytes();
  w.write(path, [&](size_t i, std::vector<uint8_t>& out) {
    p.tensor = i;
    p.name = names[i];
    if (progress) progress(p);
    out.resize(w.tensor_bytes(i));
    fill(i, out.data());
    p.bytes += out.size();
  });
  p.tensor = names.size();
  p.name.clear();
  if (progress) progress(p);
  result.tensors = names.size();
  result.bytes = w.total_bytes();
  result.fallback_tensors = result.fallbacks.size();
  for (GgmlType t : types) ++result.tensors_by_type[dllm::type_name(t)];
}
}  // namespace convert_parts

std::string describe_type_mix(const std::map<std::string, size_t>& by_type) {
  std::vector<std::pair<size_t, std::string>> order;
  for (const auto& [type, n] : by_type) order.emplace_back(n, type);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (const auto& [n, type] : order) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + type;
  return out;
}

std::string describe_fallback(const ConvertFallback& f) {
  return f.tensor + ": rows of " + std::to_string(f.cols) + " are not a multiple of " + type_name(f.wanted) +
         "'s " + std::to_string(block_of(f.wanted)) + "-element blocks: written as " + type_name(f.written);
}

GgmlType parse_gguf_type(const std::string& name) {
  static const std::map<std::string, GgmlType> kTypes = {{"f32", GgmlType::kF32},   {"f16", GgmlType::kF16},
                                                         {"bf16", GgmlType::kBF16}, {"q8_0", GgmlType::kQ8_0},
                                                         {"q4_0", GgmlType::kQ4_0}, {"q4_k", GgmlType::kQ4_K},
                                                         {"q6_k", GgmlType::kQ6_K}};
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  auto it = kTypes.find(lower);
  if (it == kTypes.end()) fail("--type '", name, "' is not one of f32, f16, bf16, q8_0, q4_0, q4_k, q6_k");
  return it->second;
}

ConvertResult convert_hf_to_gguf(const std::string& hf_dir, const std::string& out_path, GgmlType type,
                                 const std::function<void(const ConvertProgress&)>& progress) {
  Checkpoint ck(hf_dir);
  // An encoder / decoder family outside the shared Transformer's table (diffusion_gemma_convert.cpp).
  if (is_diffusion_gemma(ck.config())) return convert_diffusion_gemma(ck, out_path, type, progress);
  HfModel hf;
  hf.family = &find_family(ck);
  // The family's own parser: convert refuses what the loader refuses, with the same message.
  hf.config = hf.family->parse_hf_config(ck);
  const TransformerConfig& c = hf.config;
  const ModelInfo& m = c.info;
  const std::string arch = hf.family->name;

  // Every tensor is checked against the config first: sizes a config implies are trusted only once the file
  // holds tensors of those shapes (the vocabulary below allocates one string per row).
  ConvertResult result;
  result.architecture = arch;
  std::vector<Entry> entries;
  auto add = [&](const TensorSpec& spec, int64_t layer) {
    const std::vector<int64_t> shape = tensor_shape(spec.role, c);
    const std::string name = tensor_name(spec.gguf, layer);
    if (is_expert(spec.role)) {
      // One HF tensor per expert, one stacked GGUF tensor per layer (llama.cpp's ffn_*_exps).
      std::vector<const TensorView*> sources;
      for (int64_t e = 0; e < c.moe.experts; ++e)
        sources.push_back(&ck.take(tensor_name(spec.hf, layer, e), shape));
      const GgmlType t = weight_type(type, shape[1]);
      if (t != type) result.fallbacks.push_back({name, type, t, shape[1]});
      entries.push_back({name, std::move(sources), {shape[1], shape[0], c.moe.experts}, t});
      return;
    }
    const TensorView* source = &ck.take(tensor_name(spec.hf, layer), shape);
    // 1-D tensors and the router stay F32, as llama.cpp keeps them (the router picks experts: discrete
    // choices).
    if (!is_matrix(spec.role) || spec.role == TensorRole::kRouter) {
      std::vector<int64_t> dims(shape.rbegin(), shape.rend());
      entries.push_back({name, {source}, dims, GgmlType::kF32});
      return;
    }
    const GgmlType t = weight_type(type, shape[1]);
    if (t != type) result.fallbacks.push_back({name, type, t, shape[1]});
    entries.push_back({name, {source}, {shape[1], shape[0]}, t, rope_pair_heads(spec, c)});
  };
  // The family's table in order: whole-model tensors, then each layer's (llama.cpp's file order).
  for (const TensorSpec& spec : hf.family->tensors) {
    if (is_per_layer(spec.role)) continue;
    if (tensor_present(spec, c))
      add(spec, 0);
    else if (spec.role == TensorRole::kHead && hf.family->tied_head_may_be_stored && ck.has(spec.hf))
      ck.take(spec.hf, tensor_shape(spec.role, c));  // a tied copy of the embedding: not written
  }
  // Llama 3.1's rope_scaling, computed from config.json, stored as llama.cpp's converter does (rope_freqs,
  // F32, after the whole-model tensors).
  TensorView rope_freqs;
  if (!c.rope_freq_factors.empty()) {
    rope_freqs.name = "rope_freqs.weight";
    rope_freqs.file = hf_dir + "/config.json";
    rope_freqs.shape = {static_cast<int64_t>(c.rope_freq_factors.size())};
    rope_freqs.data = reinterpret_cast<const uint8_t*>(c.rope_freq_factors.data());
    rope_freqs.nbytes = c.rope_freq_factors.size() * sizeof(float);
    entries.push_back({rope_freqs.name, {&rope_freqs}, {rope_freqs.shape[0]}, GgmlType::kF32});
  }
  for (int64_t i = 0; i < m.n_layers; ++i)
    for (const TensorSpec& spec : hf.family->tensors)
      if (is_per_layer(spec.role) && tensor_present(spec, c, i)) add(spec, i);
  ck.check_all_used();

  GgufWriter w;
  const std::string a = arch + ".";
  w.set_string("general.architecture", arch);
  w.set_string("general.type", "model");
  w.set_string("general.name", std::filesystem::path(hf_dir).filename().string());
  w.set_uint32("general.file_type", file_type_of(type));
  w.set_uint32("general.quantization_version", 2);
  w.set_uint32(a + "block_count", static_cast<uint32_t>(m.n_layers));
  w.set_uint32(a + "context_length", static_cast<uint32_t>(m.max_seq_len));
  w.set_uint32(a + "embedding_length", static_cast<uint32_t>(m.d_model));
  w.set_uint32(a + "feed_forward_length", static_cast<uint32_t>(m.ffn_hidden));
  w.set_uint32(a + "attention.head_count", static_cast<uint32_t>(m.n_heads));
  w.set_uint32(a + "attention.head_count_kv", static_cast<uint32_t>(m.n_kv_heads));
  w.set_float32(a + "rope.freq_base", c.rope_theta);
  w.set_float32(a + "attention.layer_norm_rms_epsilon", c.rms_eps);
  w.set_uint32(a + "vocab_size", static_cast<uint32_t>(m.vocab_size));
  // The rotated dimensions: partial RoPE (LLaDA2) writes fewer than head_dim, as llama.cpp's bailingmoe2
  // does.
  w.set_uint32(a + "rope.dimension_count",
               static_cast<uint32_t>(c.rotary_dim > 0 ? c.rotary_dim : m.head_dim));
  if (m.head_dim * m.n_heads != m.d_model) {  // an explicit head_dim (Qwen-style configs)
    w.set_uint32(a + "attention.key_length", static_cast<uint32_t>(m.head_dim));
    w.set_uint32(a + "attention.value_length", static_cast<uint32_t>(m.head_dim));
  }
  // Autoregressive families are causal without saying so, as llama.cpp writes them.
  if (!m.autoregressive) w.set_bool(a + "attention.causal", false);
  if (c.moe.experts > 0) write_moe_keys(w, a, c);
  if (!m.autoregressive) w.set_bool("diffusion.shift_logits", m.shift_logits);
  // No llama.cpp key holds a block-diffusion family's block length; named beside its diffusion.shift_logits.
  if (m.block_size > 0) w.set_uint32("diffusion.block_length", static_cast<uint32_t>(m.block_size));
  dllm::write_tokenizer(w, hf_dir, hf);

  std::vector<std::string> names;
  std::vector<GgmlType> types;
  for (const auto& e : entries) {
    w.add_tensor(e.name, e.dims, e.type);
    names.push_back(e.name);
    types.push_back(e.type);
  }
  std::vector<float> f32;
  convert_parts::write_tensors(
      w, out_path, names, types,
      [&](size_t i, uint8_t* out) {
        const Entry& e = entries[i];
        // Source by source (one expert at a time): each is whole rows, so its blocks start at a row boundary.
        size_t at = 0;
        for (const TensorView* source : e.sources) {
          const int64_t n = source->numel(), cols = e.dims[0], rows = n / cols;
          f32.resize(static_cast<size_t>(n));
          convert_to_f32(source->dtype, source->data, f32.data(), f32.size());
          if (e.permute_heads > 0) {
            const auto permuted =
                permute_rope_rows(reinterpret_cast<const uint8_t*>(f32.data()), cols * sizeof(float), rows,
                                  e.permute_heads, /*to_gguf=*/true, e.name);
            std::memcpy(f32.data(), permuted.data(), permuted.size());
          }
          quant::quantize(e.type, f32.data(), out + at, n);
          at += ggml_row_bytes(e.type, cols) * static_cast<size_t>(rows);
        }
      },
      progress, result);
  return result;
}

}  // namespace dllm
