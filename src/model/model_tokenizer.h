// A model's tokenizer wherever it lives: tokenizer.json in a Hugging Face directory (or given as a file), or
// the tokenizer.ggml.* vocabulary stored in a .gguf file. What the CLI and the server use for text.
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

}  // namespace dllm
