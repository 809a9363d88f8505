#include "server/text_codec.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "model/model_tokenizer.h"

namespace dllm::server {

TextCodec TextCodec::load(const std::string& dir, const ModelInfo& info) {
  TextCodec c;
  c.mask_id_ = info.mask_id;
  c.eos_id_ = info.eos_id;
  c.eot_id_ = info.eot_id;
  c.vocab_size_ = info.vocab_size;
  if (dir.empty()) return c;
  std::optional<ChatTemplate> gguf_chat;
  c.tokenizer_ = load_model_tokenizer(dir, &gguf_chat);
  // A tokenizer given apart from the model (serve --tokenizer) may name the end-of-turn token the model's
  // config does not.
  for (const char* name : {"<|eot_id|>", "<|im_end|>", "<|role_end|>"})
    if (c.eot_id_ < 0)
      if (auto id = c.tokenizer_->token_to_id(name)) c.eot_id_ = *id;
  if (gguf_chat) {
    c.chat_ = std::move(gguf_chat);
    return c;
  }
  namespace fs = std::filesystem;
  const fs::path base = fs::is_directory(dir) ? fs::path(dir) : fs::path(dir).parent_path();
  if (fs::exists(base / "tokenizer_config.json") || fs::exists(base / "chat_template.jinja")) {
    try {
      c.chat_ = ChatTemplate::load(base.string());
    } catch (const Error&) {
      // No chat_template in tokenizer_config.json: /v1/chat/completions answers 400 for this model.
    }
  }
  return c;
}

TextCodec TextCodec::load_if_present(const std::string& dir, const ModelInfo& info) {
  namespace fs = std::filesystem;
  const bool present = fs::is_regular_file(dir) || fs::exists(fs::path(dir) / "tokenizer.json");
  if (!present) return load("", info);
  try {
    return load(dir, info);
  } catch (const Error& e) {
    TextCodec c = load("", info);
    c.tokenizer_error_ = e.what();
    return c;
  }
}

std::vector<int32_t> TextCodec::encode(std::string_view text, bool add_special_tokens) const {
  if (tokenizer_) return tokenizer_->encode(text, add_special_tokens);
  if (!tokenizer_error_.empty()) throw Error(tokenizer_error_);
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',' || text[i] == '\n' || text[i] == '\t')) ++i;
    if (i >= text.size()) break;
    size_t j = i;
    while (j < text.size() && !(text[j] == ' ' || text[j] == ',' || text[j] == '\n' || text[j] == '\t')) ++j;
    const std::string word(text.substr(i, j - i));
    long long v = -1;
    bool ok = word.size() <= 10 &&
              std::all_of(word.begin(), word.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (ok) v = std::stoll(word);
    if (!ok || v >= vocab_size_)
      fail("'", word, "' is not a token id below ", vocab_size_,
           " (this model has no tokenizer.json: text is token ids separated by spaces)");
    ids.push_back(static_cast<int32_t>(v));
    i = j;
  }
  return ids;
}

std::string TextCodec::decode(std::span<const int32_t> ids) const {
  if (tokenizer_) return tokenizer_->decode(ids, /*skip_special_tokens=*/true);
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(ids[i]);
  }
  return out;
}

TextCodec::Pieces TextCodec::pieces(std::span<const int32_t> canvas, int32_t mask_id) const {
  const int32_t mask = mask_id >= 0 ? mask_id : mask_id_;
  Pieces p;
  p.text.resize(canvas.size());
  p.masked.resize(canvas.size());
  for (size_t i = 0; i < canvas.size(); ++i) {
    const int32_t id = canvas[i];
    if (id == mask) {
      p.masked[i] = 1;
      continue;
    }
    if (!tokenizer_) {
      if (i) p.text[i] = ' ';
      p.text[i] += std::to_string(id);
      continue;
    }
    const int32_t one[1] = {id};
    if (i > 0 && canvas[i - 1] != mask) {
      const int32_t two[2] = {canvas[i - 1], id};
      const std::string left = tokenizer_->decode(std::span<const int32_t>(two, 1), false);
      const std::string both = tokenizer_->decode(two, false);
      if (both.compare(0, left.size(), left) == 0) {
        p.text[i] = both.substr(left.size());
        continue;
      }
    }
    p.text[i] = tokenizer_->decode(one, false);
  }
  return p;
}

std::string TextCodec::canvas_text(std::span<const int32_t> canvas, std::string_view placeholder,
                                   int32_t mask_id) const {
  const int32_t mask = mask_id >= 0 ? mask_id : mask_id_;
  if (tokenizer_) return render_canvas(*tokenizer_, canvas, mask, placeholder, /*skip_special_tokens=*/false);
  std::string out;
  for (size_t i = 0; i < canvas.size(); ++i) {
    if (i) out += ' ';
    out += canvas[i] == mask ? std::string(placeholder) : std::to_string(canvas[i]);
  }
  return out;
}

PrefixStream::PrefixStream(const TextCodec& codec, std::vector<std::string> stop, int32_t mask_id,
                           int32_t eos_id)
    : codec_(codec),
      stop_(std::move(stop)),
      mask_id_(mask_id >= 0 ? mask_id : codec.mask_id()),
      eos_id_(eos_id) {
  if (codec_.tokenizer()) detok_.emplace(*codec_.tokenizer(), /*skip_special_tokens=*/true);
}

std::string PrefixStream::advance(std::span<const int32_t> canvas, bool final, int64_t final_prefix) {
  if (done_) return "";
  const int64_t end = final_prefix < 0 ? static_cast<int64_t>(canvas.size())
                                       : std::min<int64_t>(final_prefix, static_cast<int64_t>(canvas.size()));
  while (consumed_ < end) {
    const int32_t id = canvas[consumed_];
    if (id == mask_id_) break;
    if (codec_.is_end(id, eos_id_) || std::find(end_at_.begin(), end_at_.end(), id) != end_at_.end()) {
      stopped_ = true;
      break;
    }
    if (detok_)
      pending_ += detok_->push(id);
    else {
      if (consumed_ > 0) pending_ += ' ';
      pending_ += std::to_string(id);
    }
    ++consumed_;
    if (std::find(stop_after_.begin(), stop_after_.end(), id) != stop_after_.end()) {
      stopped_ = true;
      break;
    }
  }
  if (final || stopped_) {
    if (detok_) pending_ += detok_->flush();
    done_ = true;
  }
  std::string out = emit(done_);
  if (stopped_) done_ = true;
  return out;
}

std::string PrefixStream::emit(bool final) {
  // A stop string may start anywhere in the pending text (emitted text never holds one: it was checked).
  size_t cut = std::string::npos;
  for (const auto& s : stop_) {
    const size_t at = pending_.find(s);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  std::string out;
  if (cut != std::string::npos) {
    out = pending_.substr(0, cut);
    pending_.clear();
    stopped_ = stop_hit_ = true;
  } else if (final) {
    out.swap(pending_);
  } else {
    // Hold back the longest tail that could still grow into a stop string.
    size_t hold = 0;
    for (const auto& s : stop_)
      for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k)
        if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
  }
  text_ += out;
  return out;
}

}  // namespace dllm::server
