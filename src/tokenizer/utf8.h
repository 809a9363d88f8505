// UTF-8 helpers shared by the tokenizer: decoding, encoding, validation and lossy repair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dllm::tok {

// Number of bytes of the sequence that starts with `lead` (1 for invalid lead bytes).
inline size_t utf8_seq_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// Decodes the code point at s[i] (s must be valid UTF-8) and advances i.
inline uint32_t utf8_next(std::string_view s, size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    ++i;
    return b;
  }
  size_t n = utf8_seq_len(b);
  uint32_t cp = n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < n && i + k < s.size(); ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

inline void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Length of the valid UTF-8 sequence at s[i], or 0 when it is invalid or truncated.
size_t utf8_valid_seq_at(std::string_view s, size_t i);

bool utf8_is_valid(std::string_view s);

// Like Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view s);

// Length of the longest prefix of s that does not end inside an incomplete (but so far valid) sequence.
// Bytes that can never become valid are not held back.
size_t utf8_complete_prefix(std::string_view s);

}  // namespace dllm::tok
