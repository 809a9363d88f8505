// Added tokens ("added_tokens" of tokenizer.json): found in the text before normalization (or after it, for
// tokens with normalized=true), leftmost-longest, honouring lstrip / rstrip / single_word.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dllm::tok {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A piece of text: either an added token (id >= 0) or plain text to be encoded (id == -1).
struct Segment {
  size_t begin, end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  bool empty() const { return tokens_.empty(); }
  // Splits s into segments covering it (plain text segments may be empty and are then omitted).
  void split(std::string_view s, std::vector<Segment>& out) const;

 private:
  // Longest token that matches at s[pos], or -1.
  int longest_at(std::string_view s, size_t pos) const;
  std::vector<AddedToken> tokens_;
  std::vector<std::vector<int>> by_first_byte_;  // indices into tokens_, longest first
};

}  // namespace dllm::tok
