#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace dllm::tok {

namespace {

bool is_space(uint32_t cp) {
  return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// Approximation of a "word character" (alphanumeric or '_'): ASCII letters/digits/_ and non-space non-ASCII.
bool is_word_char(uint32_t cp) {
  if (cp < 0x80)
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  return !is_space(cp);
}

uint32_t last_char(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return utf8_next(s, i);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  by_first_byte_.resize(256);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(static_cast<int>(i));
  }
  for (auto& v : by_first_byte_) {
    std::stable_sort(v.begin(), v.end(),
                     [&](int a, int b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
  }
}

int AddedTokenMatcher::longest_at(std::string_view s, size_t pos) const {
  for (int idx : by_first_byte_[static_cast<unsigned char>(s[pos])]) {
    const std::string& c = tokens_[idx].content;
    if (s.size() - pos >= c.size() && s.compare(pos, c.size(), c) == 0) return idx;
  }
  return -1;
}

void AddedTokenMatcher::split(std::string_view s, std::vector<Segment>& out) const {
  out.clear();
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    if (by_first_byte_.empty() || by_first_byte_[static_cast<unsigned char>(s[pos])].empty()) {
      ++pos;
      continue;
    }
    int idx = longest_at(s, pos);
    if (idx < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[idx];
    size_t start = pos, stop = pos + tok.content.size();
    pos = stop;  // matches never overlap
    if (tok.single_word) {
      bool start_ok = start == 0 || !is_word_char(last_char(s, start));
      size_t j = stop;
      bool stop_ok = stop == s.size() || !is_word_char(utf8_next(s, j));
      if (!start_ok || !stop_ok) continue;
    }
    if (tok.lstrip) {
      size_t b = start;
      while (b > 0) {
        size_t i = b - 1;
        while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
        size_t j = i;
        if (!is_space(utf8_next(s, j))) break;
        b = i;
      }
      start = std::max(b, start_offset);
    }
    if (tok.rstrip) {
      while (stop < s.size()) {
        size_t j = stop;
        if (!is_space(utf8_next(s, j))) break;
        stop = j;
      }
      pos = std::max(pos, stop);
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, tok.id});
    start_offset = stop;
  }
  if (start_offset < s.size()) out.push_back({start_offset, s.size(), -1});
}

}  // namespace dllm::tok
