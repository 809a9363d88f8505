// The tokenizer stored in a GGUF file (tokenizer.ggml.*) as a tokenizer.json document, so that the one
// tokenizer implementation (src/tokenizer, Hugging Face semantics) runs GGUF files too; and the reverse
// question the converter asks: which tokenizer.ggml.pre name a tokenizer.json's pre-tokenizer regex is.
//
// llama.cpp names pre-tokenizers instead of storing them: tokenizer.ggml.pre selects a regex compiled into
// llama.cpp. The names below are the byte-level BPE ones its converter writes for the model families dllm.cpp
// runs (GPT-2, LLaMA-3 / LLaDA, Qwen2 / Dream); another name is an error that says which.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "io/gguf.h"

namespace dllm {

// tokenizer.json for `tok` (read from `file`, named in errors). Byte-level BPE ("gpt2") only: SentencePiece
// ("llama") and WordPiece ("bert") vocabularies throw, naming tokenizer.ggml.model.
nlohmann::json tokenizer_json_from_gguf(const GgufTokenizer& tok, const std::string& file);

// The tokenizer.ggml.pre name whose regex is `regex` ("" when none is).
std::string gguf_pre_name_for_regex(const std::string& regex);

}  // namespace dllm
