// Infill prompts: text with placeholders `<|mask|>` (kDefaultInfillLength tokens) or `<|mask:N|>` (N tokens),
// turned into a canvas of prefix ids + N mask ids + ... + suffix ids for dllm::infill. docs/denoising.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dllm {

class Tokenizer;

// 16 tokens: one or two lines of code with a byte-level BPE tokenizer (about 3-4 characters per token).
inline constexpr int64_t kDefaultInfillLength = 16;

struct InfillTemplate {
  std::vector<std::string> texts;  // the n + 1 literal pieces around the n placeholders (may be empty)
  std::vector<int64_t> lengths;    // the n span lengths, in tokens
};

// Splits text at its placeholders; the error names the bad placeholder. `<|mask:0|>` and lengths above 65536 are
// errors; text without a placeholder gives one piece and no span.
InfillTemplate parse_infill_template(std::string_view text, int64_t default_length = kDefaultInfillLength);

struct InfillCanvas {
  std::vector<int32_t> ids;         // prefix ids, mask ids, middle ids, ..., suffix ids
  std::vector<int64_t> span_begin;  // canvas position of each span's first mask
  std::vector<int64_t> span_length;
};

// Each literal piece is encoded on its own (no special tokens), spans become mask_id runs; a non-empty `bos`
// (e.g. the model's BOS id when its tokenizer adds one) is put first.
InfillCanvas build_infill_canvas(const Tokenizer& tok, const InfillTemplate& t, int32_t mask_id,
                                 const std::vector<int32_t>& bos = {});

}  // namespace dllm
