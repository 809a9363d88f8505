// A model's tokenizer wherever it lives: tokenizer.json in a Hugging Face directory (or given as a file), or
// the tokenizer.ggml.* vocabulary stored in a .gguf file. What the CLI and the server use for text.
//
// The tokenizer is needed only where text is: a model whose tokenizer cannot be built (a GGUF file with a
// placeholder vocabulary, an unknown tokenizer.ggml.pre, ...) still runs on token ids.
// try_load_model_tokenizer keeps the reason, so that the caller warns once and every later use of text fails
// with that same message.
#pragma once

#include <optional>
#include <string>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dllm {

// True when `path` is a .gguf file, a tokenizer.json file, or a directory holding tokenizer.json.
bool has_model_tokenizer(const std::string& path);

// Throws dllm::Error naming the file (and, for GGUF, the tokenizer.ggml key) when it cannot be built.
// With `gguf_chat`, a GGUF file's tokenizer.chat_template (with its bos/eos tokens) is built from the same
// read of the file; it stays empty when the file has none or `path` is not a GGUF file (directories:
// ChatTemplate::load).
Tokenizer load_model_tokenizer(const std::string& path, std::optional<ChatTemplate>* gguf_chat = nullptr);

// A model's tokenizer, or why it has none.
struct ModelTokenizer {
  std::optional<Tokenizer> tokenizer;
  std::optional<ChatTemplate> gguf_chat;  // with_gguf_chat: the GGUF file's tokenizer.chat_template
  // Why `tokenizer` is empty: the message load_model_tokenizer throws (naming the file and key), or "" when
  // `path` has no tokenizer at all (a directory without tokenizer.json).
  std::string error;
};

// load_model_tokenizer that returns a failure as `error` instead of throwing it.
ModelTokenizer try_load_model_tokenizer(const std::string& path, bool with_gguf_chat = false);

}  // namespace dllm
