#include "model/model_tokenizer.h"

#include <filesystem>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_tokenizer_json.h"

namespace dllm {

bool has_model_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return true;  // tokenizer.json itself, or a .gguf file
  return fs::is_regular_file(fs::path(path) / "tokenizer.json", ec);
}

Tokenizer load_model_tokenizer(const std::string& path) {
  if (!is_gguf_file(path)) return Tokenizer::load(path);
  const GgufFile file(path);
  const auto tok = read_gguf_tokenizer(file);
  if (!tok) fail(path, ": no tokenizer.ggml.tokens, so text is not possible; use token ids or --tokenizer");
  return Tokenizer::from_json_text(tokenizer_json_from_gguf(*tok, path).dump(), path + " (tokenizer.ggml.*)");
}

std::optional<ChatTemplate> gguf_chat_template(const std::string& path) {
  if (!is_gguf_file(path)) return std::nullopt;
  const GgufFile file(path);
  const auto tok = read_gguf_tokenizer(file);
  if (!tok || tok->chat_template.empty()) return std::nullopt;
  nlohmann::json special = nlohmann::json::object();
  auto text = [&](int64_t id) {
    return id >= 0 && id < static_cast<int64_t>(tok->tokens.size()) ? tok->tokens[id] : "";
  };
  if (tok->bos_id >= 0) special["bos_token"] = text(tok->bos_id);
  if (tok->eos_id >= 0) special["eos_token"] = text(tok->eos_id);
  return ChatTemplate::from_string(tok->chat_template, special, path + " (tokenizer.chat_template)");
}

}  // namespace dllm
