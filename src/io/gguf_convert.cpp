#include "io/gguf_convert.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "core/dtype.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/gguf_tokenizer_json.h"
#include "io/gguf_writer.h"
#include "io/json_file.h"
#include "kernels/quant/quant.h"
#include "model/config_reader.h"
#include "model/registry.h"

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
  std::string name;           // GGUF name
  const TensorView* source;   // HF tensor
  std::vector<int64_t> dims;  // ggml order
  GgmlType type;
  int64_t permute_heads = 0;  // LLaDA q/k: rows into llama.cpp's adjacent-pair order
};

struct HfModel {
  std::string arch;
  int64_t d = 0, layers = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, ctx = 0;
  double theta = 10000, eps = 1e-5;
  int64_t mask = -1, bos = -1, eos = -1, pad = -1;
  bool tied = false, shift_logits = false, add_bos = false;
  const char* eot_text = "";
};

HfModel parse(const Checkpoint& ck, const std::string& arch) {
  ConfigReader r(ck.config(), ck.dir() + "/config.json");
  ConfigReader g(ck.generation_config(), ck.dir() + "/generation_config.json");
  HfModel m;
  m.arch = arch;
  auto token = [&](const char* key, bool config_first) -> int64_t {
    const ConfigReader& a = config_first ? r : g;
    const ConfigReader& b = config_first ? g : r;
    if (auto v = a.optional_token_id(key)) return *v;
    return b.optional_token_id(key).value_or(-1);
  };
  if (arch == "llada") {
    m.d = r.positive_int("d_model");
    m.layers = r.positive_int("n_layers");
    m.heads = r.positive_int("n_heads");
    m.kv_heads = r.optional_int("n_kv_heads").value_or(m.heads);
    m.ffn = r.optional_int("mlp_hidden_size").value_or(r.optional_int("mlp_ratio").value_or(4) * m.d);
    m.vocab = r.optional_int("embedding_size").value_or(r.positive_int("vocab_size"));
    m.ctx = r.optional_int("max_sequence_length").value_or(4096);
    m.theta = r.optional_number("rope_theta").value_or(10000.0);
    m.eps = r.optional_number("rms_norm_eps").value_or(1e-5);
    m.mask = r.optional_int("mask_token_id").value_or(126336);
    m.eos = token("eos_token_id", true);
    m.pad = token("pad_token_id", true);
    m.bos = token("bos_token_id", false);
    m.tied = r.optional_bool("weight_tying").value_or(false);
    m.add_bos = true;
    m.eot_text = "<|eot_id|>";
  } else if (arch == "dream") {
    m.d = r.positive_int("hidden_size");
    m.layers = r.positive_int("num_hidden_layers");
    m.heads = r.positive_int("num_attention_heads");
    m.kv_heads = r.optional_int("num_key_value_heads").value_or(m.heads);
    m.ffn = r.positive_int("intermediate_size");
    m.vocab = r.positive_int("vocab_size");
    m.ctx = r.optional_int("max_position_embeddings").value_or(32768);
    m.theta = r.optional_number("rope_theta").value_or(10000.0);
    m.eps = r.optional_number("rms_norm_eps").value_or(1e-6);
    const auto mask = r.optional_int("mask_token_id");
    if (!mask) r.fail_field("mask_token_id", "is missing (Dream needs the [MASK] id to denoise)");
    m.mask = *mask;
    m.eos = token("eos_token_id", true);
    m.pad = token("pad_token_id", true);
    m.bos = token("bos_token_id", true);
    m.tied = r.optional_bool("tie_word_embeddings").value_or(false);
    m.shift_logits = true;
    m.eot_text = "<|im_end|>";
  } else {
    fail(ck.dir(), ": architecture '", arch, "' has no GGUF conversion (supported: llada, dream)");
  }
  if (m.kv_heads <= 0 || m.heads % m.kv_heads != 0 || m.d % m.heads != 0 || m.ffn <= 0 || m.vocab <= 0)
    fail(ck.dir(), "/config.json: inconsistent head / size fields");
  return m;
}

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
void write_tokenizer(GgufWriter& w, const std::string& dir, const HfModel& m) {
  std::vector<std::string> tokens(static_cast<size_t>(m.vocab));
  std::vector<int32_t> types(tokens.size(), GgufTokenizer::kUserDefined);
  std::vector<std::string> merges;
  int64_t eot = -1;
  bool add_bos = m.add_bos;  // the family's default, or what tokenizer.json's post-processor does
  const std::string tj = dir + "/tokenizer.json";
  if (file_exists(tj)) {
    const auto tok = read_json_file(tj);
    std::fill(types.begin(), types.end(), GgufTokenizer::kUnused);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = "[PAD" + std::to_string(i) + "]";
    const auto& model = tok.at("model");
    for (auto it = model.at("vocab").begin(); it != model.at("vocab").end(); ++it) {
      const int64_t id = it.value().get<int64_t>();
      if (id < 0 || id >= m.vocab)
        fail(tj, ": token '", it.key(), "' has id ", id, " outside the ", m.vocab, " embeddings");
      tokens[id] = it.key();
      types[id] = GgufTokenizer::kNormal;
    }
    if (tok.contains("added_tokens"))
      for (const auto& a : tok["added_tokens"]) {
        const int64_t id = a.at("id").get<int64_t>();
        if (id < 0 || id >= m.vocab)
          fail(tj, ": added token id ", id, " outside the ", m.vocab, " embeddings");
        tokens[id] = a.at("content").get<std::string>();
        types[id] = a.value("special", false) ? GgufTokenizer::kControl : GgufTokenizer::kUserDefined;
        if (tokens[id] == m.eot_text) eot = id;
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
    if (pre.empty()) pre = m.arch == "dream" ? "qwen2" : "default";
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
    if (v >= 0 && v < m.vocab) w.set_uint32(std::string("tokenizer.ggml.") + key, static_cast<uint32_t>(v));
  };
  id("bos_token_id", m.bos);
  id("eos_token_id", m.eos);
  id("eot_token_id", eot);
  id("padding_token_id", m.pad >= 0 ? m.pad : m.eos);
  id("mask_token_id", m.mask);
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

}  // namespace

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
  const std::string arch = find_architecture(ck).name;
  const HfModel m = parse(ck, arch);
  const int64_t hd = m.d / m.heads, q_dim = m.heads * hd, kv_dim = m.kv_heads * hd;

  GgufWriter w;
  const std::string a = arch + ".";
  w.set_string("general.architecture", arch);
  w.set_string("general.type", "model");
  w.set_string("general.name", std::filesystem::path(hf_dir).filename().string());
  w.set_uint32("general.file_type", file_type_of(type));
  w.set_uint32("general.quantization_version", 2);
  w.set_uint32(a + "block_count", static_cast<uint32_t>(m.layers));
  w.set_uint32(a + "context_length", static_cast<uint32_t>(m.ctx));
  w.set_uint32(a + "embedding_length", static_cast<uint32_t>(m.d));
  w.set_uint32(a + "feed_forward_length", static_cast<uint32_t>(m.ffn));
  w.set_uint32(a + "attention.head_count", static_cast<uint32_t>(m.heads));
  w.set_uint32(a + "attention.head_count_kv", static_cast<uint32_t>(m.kv_heads));
  w.set_float32(a + "rope.freq_base", static_cast<float>(m.theta));
  w.set_float32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(m.eps));
  w.set_uint32(a + "vocab_size", static_cast<uint32_t>(m.vocab));
  w.set_uint32(a + "rope.dimension_count", static_cast<uint32_t>(hd));
  w.set_bool(a + "attention.causal", false);
  w.set_bool("diffusion.shift_logits", m.shift_logits);
  write_tokenizer(w, hf_dir, m);

  ConvertResult result;
  result.architecture = arch;
  std::vector<Entry> entries;
  auto vec = [&](const std::string& name, const std::string& hf, int64_t n) {
    entries.push_back({name, &ck.take(hf, {n}), {n}, GgmlType::kF32});
  };
  auto mat = [&](const std::string& name, const std::string& hf, int64_t out, int64_t in,
                 int64_t permute = 0) {
    const GgmlType t = weight_type(type, in);
    if (t != type) ++result.fallback_tensors;
    entries.push_back({name, &ck.take(hf, {out, in}), {in, out}, t, permute});
  };
  const bool llada = arch == "llada";
  mat("token_embd.weight", llada ? "model.transformer.wte.weight" : "model.embed_tokens.weight", m.vocab,
      m.d);
  vec("output_norm.weight", llada ? "model.transformer.ln_f.weight" : "model.norm.weight", m.d);
  const std::string head = llada ? "model.transformer.ff_out.weight" : "lm_head.weight";
  if (!m.tied)
    mat("output.weight", head, m.vocab, m.d);
  else if (ck.has(head))
    ck.take(head, {m.vocab, m.d});  // a copy of the embedding: not written
  for (int64_t i = 0; i < m.layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    if (llada) {
      const std::string p = "model.transformer.blocks." + std::to_string(i) + ".";
      vec(b + "attn_norm.weight", p + "attn_norm.weight", m.d);
      vec(b + "ffn_norm.weight", p + "ff_norm.weight", m.d);
      mat(b + "attn_q.weight", p + "q_proj.weight", q_dim, m.d, m.heads);
      mat(b + "attn_k.weight", p + "k_proj.weight", kv_dim, m.d, m.kv_heads);
      mat(b + "attn_v.weight", p + "v_proj.weight", kv_dim, m.d);
      mat(b + "attn_output.weight", p + "attn_out.weight", m.d, q_dim);
      mat(b + "ffn_gate.weight", p + "ff_proj.weight", m.ffn, m.d);
      mat(b + "ffn_up.weight", p + "up_proj.weight", m.ffn, m.d);
      mat(b + "ffn_down.weight", p + "ff_out.weight", m.d, m.ffn);
    } else {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      vec(b + "attn_norm.weight", p + "input_layernorm.weight", m.d);
      vec(b + "ffn_norm.weight", p + "post_attention_layernorm.weight", m.d);
      mat(b + "attn_q.weight", p + "self_attn.q_proj.weight", q_dim, m.d);
      vec(b + "attn_q.bias", p + "self_attn.q_proj.bias", q_dim);
      mat(b + "attn_k.weight", p + "self_attn.k_proj.weight", kv_dim, m.d);
      vec(b + "attn_k.bias", p + "self_attn.k_proj.bias", kv_dim);
      mat(b + "attn_v.weight", p + "self_attn.v_proj.weight", kv_dim, m.d);
      vec(b + "attn_v.bias", p + "self_attn.v_proj.bias", kv_dim);
      mat(b + "attn_output.weight", p + "self_attn.o_proj.weight", m.d, q_dim);
      mat(b + "ffn_gate.weight", p + "mlp.gate_proj.weight", m.ffn, m.d);
      mat(b + "ffn_up.weight", p + "mlp.up_proj.weight", m.ffn, m.d);
      mat(b + "ffn_down.weight", p + "mlp.down_proj.weight", m.d, m.ffn);
    }
  }
  ck.check_all_used();
  for (const auto& e : entries) w.add_tensor(e.name, e.dims, e.type);

  ConvertProgress p;
  p.tensors = entries.size();
  p.total_bytes = w.total_bytes();
  std::vector<float> f32, permuted;
  w.write(out_path, [&](size_t i, std::vector<uint8_t>& out) {
    const Entry& e = entries[i];
    p.tensor = i;
    p.name = e.name;
    if (progress) progress(p);
    const int64_t n = e.source->numel();
    f32.resize(static_cast<size_t>(n));
    convert_to_f32(e.source->dtype, e.source->data, f32.data(), f32.size());
    if (e.permute_heads > 0) {
      // HF row h*hd + t*hd/2 + j goes to row h*hd + 2j + t (llama.cpp's LLaDAModel.permute).
      const int64_t rows = e.dims[1], cols = e.dims[0], rhd = rows / e.permute_heads, half = rhd / 2;
      permuted.resize(f32.size());
      for (int64_t h = 0; h < e.permute_heads; ++h)
        for (int64_t j = 0; j < half; ++j)
          for (int64_t t = 0; t < 2; ++t)
            std::copy_n(f32.data() + (h * rhd + t * half + j) * cols, cols,
                        permuted.data() + (h * rhd + 2 * j + t) * cols);
      f32.swap(permuted);
    }
    out.resize(w.tensor_bytes(i));
    quant::quantize(e.type, f32.data(), out.data(), n);
    p.bytes += out.size();
  });
  p.tensor = entries.size();
  p.name.clear();
  if (progress) progress(p);
  result.tensors = entries.size();
  result.bytes = w.total_bytes();
  return result;
}

}  // namespace dllm
