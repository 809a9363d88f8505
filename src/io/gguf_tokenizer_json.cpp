#include "io/gguf_tokenizer_json.h"

#include <array>
#include <utility>

#include "core/error.h"

namespace dllm {
namespace {

// The pre-tokenizer split regexes of llama.cpp's byte-level BPE pre-types (llama-vocab.cpp), as the Hugging
// Face tokenizer.json files of those families spell them.
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// name -> regex. The first name of a regex is what the converter writes for it.
constexpr std::array<std::pair<const char*, const char*>, 6> kPreTokenizers = {{
    {"gpt-2", kGpt2Regex},
    {"default", kGpt2Regex},
    {"llama-bpe", kLlama3Regex},
    {"llama3", kLlama3Regex},
    {"qwen2", kQwen2Regex},
    {"deepseek-r1-qwen", kQwen2Regex},
}};

}  // namespace

std::string gguf_pre_name_for_regex(const std::string& regex) {
  for (const auto& [name, re] : kPreTokenizers)
    if (regex == re) return name;
  return "";
}

nlohmann::json tokenizer_json_from_gguf(const GgufTokenizer& tok, const std::string& file) {
  if (tok.model != "gpt2")
    fail(file, ": tokenizer.ggml.model = '", tok.model,
         "' is not supported (byte-level BPE 'gpt2' is); give a tokenizer.json with --tokenizer");
  const std::string pre = tok.pre.empty() ? "default" : tok.pre;
  const char* regex = nullptr;
  for (const auto& [name, re] : kPreTokenizers)
    if (pre == name) regex = re;
  if (!regex) {
    std::string known;
    for (const auto& [name, re] : kPreTokenizers) known += (known.empty() ? "" : ", ") + std::string(name);
    fail(file, ": tokenizer.ggml.pre = '", pre, "' is not a pre-tokenizer dllm.cpp knows (", known,
         "); give a tokenizer.json with --tokenizer");
  }

  // Control and user-defined tokens are matched whole before BPE (Hugging Face "added tokens"); control ones
  // are special (skipped by decode with skip_special_tokens).
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array();
  for (size_t id = 0; id < tok.tokens.size(); ++id) {
    const std::string& text = tok.tokens[id];
    const int32_t type = id < tok.token_types.size() ? tok.token_types[id] : GgufTokenizer::kNormal;
    if (!vocab.contains(text)) vocab[text] = id;
    if (type == GgufTokenizer::kControl || type == GgufTokenizer::kUserDefined)
      added.push_back({{"id", id},
                       {"content", text},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", type == GgufTokenizer::kUserDefined},
                       {"special", type == GgufTokenizer::kControl}});
  }

  nlohmann::json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  // Qwen2-family tokenizer.json files normalise to NFC first; llama.cpp does not, and differs from them on
  // decomposed text. We follow the Hugging Face files.
  j["normalizer"] = pre == "qwen2" || pre == "deepseek-r1-qwen" ? nlohmann::json{{"type", "NFC"}} : nlohmann::json();
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"},
         {"add_prefix_space", false},
         {"trim_offsets", false},
         {"use_regex", false}}}}};
  // add_bos_token: the post-processor prepends BOS, as Hugging Face's TemplateProcessing does.
  if (tok.add_bos.value_or(false) && tok.bos_id >= 0 &&
      tok.bos_id < static_cast<int64_t>(tok.tokens.size())) {
    const std::string& bos = tok.tokens[static_cast<size_t>(tok.bos_id)];
    j["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {tok.bos_id}}, {"tokens", {bos}}}}}}};
  } else {
    j["post_processor"] = nullptr;
  }
  j["decoder"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", tok.merges}};
  return j;
}

}  // namespace dllm
