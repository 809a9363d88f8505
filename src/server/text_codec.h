// Text <-> token ids for a served model: the model's tokenizer.json (and chat template) when it has one, else
// an "ids codec" where text is the token ids written as decimal numbers ("12 7 480"), so that a model without
// a tokenizer (the tiny test models) can still be served, streamed and shown. A model whose own tokenizer
// cannot be built (a GGUF file with a placeholder vocabulary, ...) is served on token ids too, and text then
// fails with the reason (tokenizer_error()).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dllm/dllm.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dllm::server {

class TextCodec {
 public:
  // `dir`: a directory with tokenizer.json (and tokenizer_config.json for the chat template), or "" for the
  // ids codec. Throws dllm::Error when a tokenizer.json is there but cannot be loaded.
  static TextCodec load(const std::string& dir, const ModelInfo& info);
  // Looks for tokenizer.json in `dir` (or `dir` is a tokenizer.json / .gguf file): the tokenizer codec when
  // it is there, the ids codec otherwise. A tokenizer that is there but cannot be built is not thrown: the
  // codec decodes as the ids codec does, and encode() throws the reason (tokenizer_error()).
  static TextCodec load_if_present(const std::string& dir, const ModelInfo& info);

  bool has_tokenizer() const { return tokenizer_.has_value(); }
  const ChatTemplate* chat_template() const { return chat_ ? &*chat_ : nullptr; }
  const Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }
  // "tokenizer.json", "ids" (text is token ids), or "none" (the tokenizer could not be built: no text).
  std::string kind() const {
    return has_tokenizer() ? "tokenizer.json" : tokenizer_error_.empty() ? "ids" : "none";
  }
  // Why the model's tokenizer could not be built (naming the file and key); "" when it was, or there is none.
  const std::string& tokenizer_error() const { return tokenizer_error_; }

  // Throws dllm::Error (ids codec: a word that is not a token id; kind "none": tokenizer_error()).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Special tokens are skipped (ids codec: every id is printed).
  std::string decode(std::span<const int32_t> ids) const;

  // The text of each canvas position, for a live view: "" for masks (masked[i] = 1); otherwise the token's
  // text in the context of its left neighbour (so SentencePiece spaces come out right). Joined, the pieces
  // approximate the decoded text (a character split over tokens shows as U+FFFD pieces).
  struct Pieces {
    std::vector<std::string> text;
    std::vector<uint8_t> masked;
  };
  // `mask_id` >= 0: a request's own mask id (GenerateParams::mask_id) instead of the model's.
  Pieces pieces(std::span<const int32_t> canvas, int32_t mask_id = -1) const;
  // The canvas as one text: each mask becomes `placeholder`.
  std::string canvas_text(std::span<const int32_t> canvas, std::string_view placeholder,
                          int32_t mask_id = -1) const;

  int32_t mask_id() const { return mask_id_; }
  // Token ids that end a generated text (EOS, EOT); `eos_id` >= 0: a request's own EOS instead of the
  // model's.
  bool is_end(int32_t id, int32_t eos_id = -1) const {
    return id >= 0 && (id == (eos_id >= 0 ? eos_id : eos_id_) || id == eot_id_);
  }

 private:
  std::optional<Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_;
  std::string tokenizer_error_;
  int32_t mask_id_ = -1, eos_id_ = -1, eot_id_ = -1;
  int64_t vocab_size_ = 0;
};

// Incremental text of a row as it is committed left to right: push the longest final committed prefix after
// each step, get the text that became final (held back while it could still be the start of a stop string or
// an incomplete character). Stops at the first end token or stop string.
class PrefixStream {
 public:
  // `mask_id` / `eos_id` >= 0: the request's own ids (GenerateParams::mask_id / eos_id), else the codec's.
  PrefixStream(const TextCodec& codec, std::vector<std::string> stop, int32_t mask_id = -1,
               int32_t eos_id = -1);
  // `canvas`: the row's generated region; only positions [0, final_prefix) are taken (-1: all), so that a
  // token an edit may still replace (LLaDA2.1, StepEvent::final_prefix) is never emitted. Returns the new
  // text (possibly "").
  std::string advance(std::span<const int32_t> canvas, bool final, int64_t final_prefix = -1);
  // Tokens that end the text after themselves (SDAR's stop_ids that are not end tokens: its output keeps
  // them).
  void stop_after(std::vector<int32_t> ids) { stop_after_ = std::move(ids); }
  // More tokens that end the text before themselves, as an end token does (an autoregressive model's
  // end-of-generation ids).
  void end_at(std::vector<int32_t> ids) { end_at_ = std::move(ids); }
  bool done() const { return done_; }             // no more text will come
  bool stopped() const { return stopped_; }       // an end token or a stop string was reached
  bool stop_string() const { return stop_hit_; }  // ... and it was a stop string
  int64_t tokens() const { return consumed_; }    // committed tokens taken into the text (end token excluded)
  const std::string& text() const { return text_; }  // everything emitted so far

 private:
  const TextCodec& codec_;
  std::vector<std::string> stop_;
  int32_t mask_id_ = -1, eos_id_ = -1;
  std::vector<int32_t> stop_after_, end_at_;
  std::optional<StreamingDetokenizer> detok_;
  int64_t consumed_ = 0;
  std::string pending_;  // decoded, not yet emitted (stop-string hold-back)
  std::string text_;
  bool stopped_ = false, stop_hit_ = false, done_ = false;
  std::string emit(bool final);
};

}  // namespace dllm::server
