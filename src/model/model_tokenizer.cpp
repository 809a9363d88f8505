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
  const std::string name = path + " (tokenizer.ggml.*)";
  try {
    return Tokenizer::from_json_text(tokenizer_json_from_gguf(*tok, path).dump(), name);
  } catch (const Error& e) {
    // The tokenizer.json built from the file names its JSON paths: say which key they came from.
    std::string message = e.what();
    for (auto [json_path, key] : {std::pair{"$.model.merges", "tokenizer.ggml.merges"},
                                  {"$.model.vocab", "tokenizer.ggml.tokens"},
                                  {"$.added_tokens", "tokenizer.ggml.tokens"}}) {
      const std::string from = name + ": " + json_path;
      if (message.rfind(from, 0) == 0) {
        message = path + ": " + key + message.substr(from.size());
        break;
      }
    }
    throw Error(message);
  }
}

ModelTokenizer try_load_model_tokenizer(const std::string& path, bool with_gguf_chat) {
  ModelTokenizer out;
  if (!has_model_tokenizer(path)) return out;
  try {
    out.tokenizer = load_model_tokenizer(path, with_gguf_chat ? &out.gguf_chat : nullptr);
  } catch (const Error& e) {
    out.tokenizer.reset();
    out.gguf_chat.reset();
    out.error = e.what();
  }
  return out;
}

}  // namespace dllm
