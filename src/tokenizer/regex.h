// PCRE2 (JIT) regular expressions for pre-tokenizer and normalizer patterns written for Oniguruma.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace dllm::tok {

class Regex {
 public:
  // `where` names the pattern's origin in error messages (e.g. "tokenizer.json:
  // $.pre_tokenizer.pattern.Regex").
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls fn(start, end) for each non-overlapping match, left to right. `s` must be valid UTF-8.
  void for_each_match(std::string_view s, const std::function<void(size_t, size_t)>& fn) const;

  // Pattern as handed to PCRE2 (after translating Oniguruma-only syntax).
  const std::string& pcre_pattern() const { return translated_; }

 private:
  struct Code;
  std::unique_ptr<Code> code_;
  std::string translated_;
};

// Escapes a literal string for use inside a pattern.
std::string regex_escape(std::string_view s);

}  // namespace dllm::tok
