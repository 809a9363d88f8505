// Hugging Face tokenizer.json (BPE models) and chat templates, in C++.
//
// Public API (namespace dllm):
//   Tokenizer            load(path) from a tokenizer.json file or a model directory; encode / decode exactly
//   like
//                        the HF `tokenizers` library; vocab queries. Immutable after load: every method is
//                        const and safe to call from several threads at once. Copies share the loaded data.
//   StreamingDetokenizer incremental decode (push ids, get text); never returns a broken UTF-8 sequence.
//   render_canvas        text of a partially denoised canvas (mask positions shown as a placeholder).
//   ChatTemplate         (tokenizer/chat_template.h) renders tokenizer_config.json's Jinja chat_template.
//
// Supported tokenizer.json components: model BPE (byte_fallback, unk_token, fuse_unk, ignore_merges,
// continuing_subword_prefix, end_of_word_suffix); normalizers NFC/NFD/NFKC/NFKD, Prepend, Replace, Strip,
// Sequence; pre-tokenizers Split, ByteLevel, Metaspace, Whitespace, WhitespaceSplit, Digits, Punctuation,
// CharDelimiterSplit, Sequence; post-processors TemplateProcessing, ByteLevel, RobertaProcessing,
// BertProcessing, Sequence; decoders ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, BPEDecoder,
// Sequence; added tokens. Anything else is a dllm::Error naming the component and its JSON path. "truncation"
// and "padding" are ignored.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dllm {

class Tokenizer {
 public:
  // An empty tokenizer (loaded() is false); every other method throws dllm::Error until one is assigned.
  Tokenizer() = default;
  bool loaded() const { return impl_ != nullptr; }

  // `path`: a tokenizer.json file, or a directory that contains one. Throws dllm::Error.
  static Tokenizer load(const std::string& path);
  // From the text of a tokenizer.json; `name` is used in error messages.
  static Tokenizer from_json_text(std::string_view json_text, const std::string& name = "tokenizer.json");

  // Invalid UTF-8 in `text` is replaced by U+FFFD first.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Ids that do not exist are dropped.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // 1 + the largest id (vocab and added tokens); some ids below it may not exist.
  int32_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token's string as stored in the vocab ("" when the id does not exist).
  std::string id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;
  // Ids of all special added tokens.
  std::vector<int32_t> special_ids() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  const Impl& impl() const;
  std::shared_ptr<const Impl> impl_;
};

// Turns ids into text as they arrive. Text is returned only once it can no longer change: a trailing
// incomplete UTF-8 sequence (or byte-fallback run) is held back until the next ids complete it, or until
// flush().
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tok, bool skip_special_tokens = false);
  // Returns the text that became final with this id (often "", e.g. inside a multi-byte character).
  std::string push(int32_t id);
  // Returns what is left (incomplete bytes become U+FFFD) and resets the stream.
  std::string flush();

 private:
  Tokenizer tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;  // ids_[prefix_offset_, read_offset_) is context already emitted
  size_t read_offset_ = 0;
};

// Text of a canvas where some positions are still masked: each maximal run of ordinary ids is decoded in
// context and every mask_id position becomes `mask_placeholder`.
std::string render_canvas(const Tokenizer& tok, std::span<const int32_t> ids, int32_t mask_id,
                          std::string_view mask_placeholder, bool skip_special_tokens = false);

}  // namespace dllm

#include "tokenizer/chat_template.h"  // ChatTemplate, part of the same public API
