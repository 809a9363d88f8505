// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): Split, ByteLevel, Metaspace, Whitespace,
// WhitespaceSplit, Digits, Punctuation, CharDelimiterSplit and Sequence.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_path.h"

namespace dllm::tok {

// One piece of a text segment. `at_start`: the piece begins at offset 0 of the original input.
struct Piece {
  std::string text;
  bool at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their splits; empty pieces are dropped.
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JNode& node);

// GPT-2 byte-to-unicode table: byte b is represented by the UTF-8 string byte_level_char(b).
const std::array<std::string, 256>& byte_level_chars();
// Inverse: code point -> byte, or -1 when the code point is not part of the table.
int byte_level_byte(uint32_t cp);

}  // namespace dllm::tok
