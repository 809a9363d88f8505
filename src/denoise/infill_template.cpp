#include "denoise/infill_template.h"

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace dllm {

InfillTemplate parse_infill_template(std::string_view text, int64_t default_length) {
  static constexpr std::string_view kOpen = "<|mask", kClose = "|>";
  static constexpr int64_t kMaxLength = 65536;
  if (default_length <= 0 || default_length > kMaxLength)
    fail("infill: default span length must be in [1, ", kMaxLength, "], got ", default_length);
  InfillTemplate t;
  std::string piece;
  size_t i = 0;
  while (i < text.size()) {
    const size_t at = text.find(kOpen, i);
    if (at == std::string_view::npos) {
      piece.append(text.substr(i));
      break;
    }
    const size_t after = at + kOpen.size();
    int64_t length = -1;
    size_t end = std::string_view::npos;
    if (text.substr(after, kClose.size()) == kClose) {  // <|mask|>
      length = default_length;
      end = after + kClose.size();
    } else if (after < text.size() && text[after] == ':') {  // <|mask:N|>
      const size_t close = text.find(kClose, after);
      if (close == std::string_view::npos) fail("infill: unterminated placeholder at byte ", at, ": '",
                                                 text.substr(at, 16), "'");
      const std::string_view digits = text.substr(after + 1, close - after - 1);
      if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string_view::npos)
        fail("infill: placeholder '", text.substr(at, close + kClose.size() - at),
             "' needs a token count: <|mask:N|> with N a positive integer");
      length = std::stoll(std::string(digits));
      if (length <= 0 || length > kMaxLength)
        fail("infill: placeholder '", text.substr(at, close + kClose.size() - at), "': N must be in [1, ",
             kMaxLength, "]");
      end = close + kClose.size();
    }
    if (length < 0) {  // "<|mask" followed by something else (e.g. <|mdm_mask|> is not this; <|masks|> is text)
      piece.append(text.substr(i, after - i));
      i = after;
      continue;
    }
    piece.append(text.substr(i, at - i));
    t.texts.push_back(std::move(piece));
    piece.clear();
    t.lengths.push_back(length);
    i = end;
  }
  t.texts.push_back(std::move(piece));
  return t;
}

InfillCanvas build_infill_canvas(const Tokenizer& tok, const InfillTemplate& t, int32_t mask_id,
                                 const std::vector<int32_t>& bos) {
  InfillCanvas c;
  c.ids = bos;
  for (size_t k = 0; k < t.texts.size(); ++k) {
    const auto piece = tok.encode(t.texts[k], /*add_special_tokens=*/false);
    c.ids.insert(c.ids.end(), piece.begin(), piece.end());
    if (k < t.lengths.size()) {
      c.span_begin.push_back(static_cast<int64_t>(c.ids.size()));
      c.span_length.push_back(t.lengths[k]);
      c.ids.insert(c.ids.end(), t.lengths[k], mask_id);
    }
  }
  return c;
}

}  // namespace dllm
