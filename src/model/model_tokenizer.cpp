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

Tokenizer load_model_tokenizer(const std::string& path, std::optional<ChatTemplate>* gguf_chat) {
  if (!is_gguf_file(path)) return Tokenizer::load(path);
  const GgufFile file(path);
  const auto tok = read_gguf_tokenizer(file);
  if (!tok) fail(path, ": no tokenizer.ggml.tokens, so text is not possible; use token ids or --tokenizer");
  if (gguf_chat && !tok->chat_template.empty()) {
    nlohmann::json special = nlohmann::json::object();
    for (auto [key, id] : {std::pair{"bos_token", tok->bos_id}, {"eos_token", tok->eos_id}})
      if (id >= 0 && id < static_cast<int64_t>(tok->tokens.size())) special[key] = tok->tokens[id];
    *gguf_chat = ChatTemplate::from_string(tok->chat_template, special, path + " (tokenizer.chat_template)");
  }
  return Tokenizer::from_json_text(tokenizer_json_from_gguf(*tok, path).dump(), path + " (tokenizer.ggml.*)");
}

}  // namespace dllm
