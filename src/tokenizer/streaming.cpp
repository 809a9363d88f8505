// StreamingDetokenizer and render_canvas (declared in tokenizer.h).
#include <optional>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dllm {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

bool ends_with_replacement(const std::string& s) {
  return s.size() >= kReplacement.size() &&
         s.compare(s.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
}

}  // namespace

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(tok), skip_special_(skip_special_tokens) {}

// The window ids_[prefix_offset_, read_offset_) was emitted already; it gives the context (leading-space
// rules, byte-level merges) for decoding what follows. A decode that ends in U+FFFD may be an incomplete
// character: it is held back until more ids arrive.
std::string StreamingDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  std::span<const int32_t> all(ids_);
  std::string prefix = tok_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  std::string text = tok_.decode(all.subspan(prefix_offset_), skip_special_);
  if (text.size() <= prefix.size() || ends_with_replacement(text) ||
      text.compare(0, prefix.size(), prefix) != 0)
    return {};
  std::string delta = text.substr(prefix.size());
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  // Keep memory bounded: the ids before the context window are no longer needed.
  if (prefix_offset_ > 64) {
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_));
    read_offset_ -= prefix_offset_;
    prefix_offset_ = 0;
  }
  return delta;
}

std::string StreamingDetokenizer::flush() {
  std::span<const int32_t> all(ids_);
  std::string prefix = tok_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  std::string text = tok_.decode(all.subspan(prefix_offset_), skip_special_);
  std::string rest;
  if (text.size() > prefix.size() && text.compare(0, prefix.size(), prefix) == 0)
    rest = text.substr(prefix.size());
  else if (read_offset_ < ids_.size())
    rest = tok_.decode(all.subspan(read_offset_), skip_special_);
  ids_.clear();
  prefix_offset_ = read_offset_ = 0;
  return rest;
}

std::string render_canvas(const Tokenizer& tok, std::span<const int32_t> ids, int32_t mask_id,
                          std::string_view mask_placeholder, bool skip_special_tokens) {
  // A run that does not start the canvas is decoded after an anchor token ("a") and the anchor's text
  // removed, so decoders that treat the first token specially (leading-space Strip, Metaspace) keep the run's
  // space.
  std::optional<int32_t> anchor = tok.token_to_id("a");
  std::string anchor_text;
  if (anchor) anchor_text = tok.decode(std::span<const int32_t>(&*anchor, 1), false);
  std::string out;
  std::vector<int32_t> run;
  auto flush_run = [&](bool at_start) {
    if (run.empty()) return;
    if (at_start || !anchor || anchor_text.empty()) {
      out += tok.decode(run, skip_special_tokens);
    } else {
      run.insert(run.begin(), *anchor);
      std::string t = tok.decode(run, skip_special_tokens);
      if (t.compare(0, anchor_text.size(), anchor_text) == 0)
        out.append(t, anchor_text.size(), std::string::npos);
      else
        out += tok.decode(std::span<const int32_t>(run).subspan(1), skip_special_tokens);
    }
    run.clear();
  };
  size_t run_start = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == mask_id) {
      flush_run(run_start == 0);
      out += mask_placeholder;
      run_start = i + 1;
    } else {
      run.push_back(ids[i]);
    }
  }
  flush_run(run_start == 0);
  return out;
}

}  // namespace dllm
