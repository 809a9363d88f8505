#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "core/error.h"

namespace dllm::tok {

namespace {

// Oniguruma's \s (Unicode White_Space) also matches U+0085 (NEL), which PCRE2's \s does not; \h in
// Oniguruma's Ruby syntax is a hex digit. Everything else the HF patterns use means the same in both.
std::string translate(const std::string& p) {
  std::string out;
  out.reserve(p.size() + 16);
  int class_depth = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[i + 1];
      ++i;
      if (n == 's') {
        out += class_depth > 0 ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (n == 'S' && class_depth == 0) {
        out += "[^\\s\\x{85}]";
      } else if (n == 'h') {
        out += class_depth > 0 ? "0-9a-fA-F" : "[0-9a-fA-F]";
      } else if (n == 'H' && class_depth == 0) {
        out += "[^0-9a-fA-F]";
      } else {
        out += c;
        out += n;
      }
      continue;
    }
    if (c == '[') {
      ++class_depth;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == ']' && class_depth > 0) --class_depth;
    out += c;
  }
  return out;
}

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() {
    if (code) pcre2_code_free(code);
  }
};

Regex::Regex(const std::string& pattern, const std::string& where) : code_(std::make_unique<Code>()) {
  translated_ = translate(pattern);
  int err = 0;
  PCRE2_SIZE off = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated_.data()), translated_.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &off, nullptr);
  if (!code_->code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    fail(where, ": unsupported or invalid regex /", pattern, "/ (at offset ", off,
         "): ", reinterpret_cast<char*>(buf));
  }
  code_->jit = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

void Regex::for_each_match(std::string_view s, const std::function<void(size_t, size_t)>& fn) const {
  // Match data and JIT stack are per thread: the compiled code is shared read-only. The JIT stack may grow to
  // 64 MiB (reserved lazily) so that long inputs never hit PCRE2's default 32 KiB limit.
  struct PerThread {
    pcre2_match_data* md = pcre2_match_data_create(4, nullptr);
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
    pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
    PerThread() { pcre2_jit_stack_assign(ctx, nullptr, stack); }
    ~PerThread() {
      pcre2_match_context_free(ctx);
      pcre2_jit_stack_free(stack);
      pcre2_match_data_free(md);
    }
  };
  thread_local PerThread tl;
  pcre2_match_data* md = tl.md;
  auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  while (pos <= s.size()) {
    int rc = code_->jit ? pcre2_jit_match(code_->code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, md, tl.ctx)
                        : pcre2_match(code_->code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, md, tl.ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(rc, buf, sizeof(buf));
      fail("regex /", translated_, "/: match failed: ", reinterpret_cast<char*>(buf));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    fn(b, e);
    if (e == b) {
      // Empty match: step over one character.
      if (e >= s.size()) break;
      size_t n = 1;
      while (e + n < s.size() && (static_cast<unsigned char>(s[e + n]) & 0xC0) == 0x80) ++n;
      pos = e + n;
    } else {
      pos = e;
    }
  }
}

std::string regex_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace dllm::tok
