#include "tokenizer/utf8.h"

namespace dllm::tok {

namespace {

// Per the Unicode "maximal subpart" rules: bounds of the second byte given the lead byte.
bool second_byte_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

size_t expected_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // never valid as a lead
}

// Length of the longest prefix of s[i..] that is a valid start of a sequence (maximal subpart), >= 1.
size_t maximal_subpart(std::string_view s, size_t i, size_t* need) {
  auto lead = static_cast<unsigned char>(s[i]);
  size_t n = expected_len(lead);
  *need = n;
  if (n <= 1) return 1;
  size_t k = 1;
  while (k < n && i + k < s.size()) {
    auto b = static_cast<unsigned char>(s[i + k]);
    bool ok = k == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++k;
  }
  return k;
}

}  // namespace

size_t utf8_valid_seq_at(std::string_view s, size_t i) {
  size_t need = 0;
  size_t k = maximal_subpart(s, i, &need);
  return (need != 0 && k == need) ? k : 0;
}

bool utf8_is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = utf8_valid_seq_at(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      out.push_back(s[i++]);
      continue;
    }
    size_t need = 0;
    size_t k = maximal_subpart(s, i, &need);
    if (need != 0 && k == need) {
      out.append(s.substr(i, k));
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += k;
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last 3 bytes can start an incomplete sequence.
  size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    auto b = static_cast<unsigned char>(s[i]);
    if (b < 0xC2 || b > 0xF4) continue;
    size_t need = 0;
    size_t k = maximal_subpart(s, i, &need);
    if (i + k == s.size() && k < need) return i;  // valid so far, but truncated
  }
  return s.size();
}

}  // namespace dllm::tok
