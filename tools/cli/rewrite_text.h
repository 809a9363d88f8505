// Text helpers of `dllm rewrite`: which bytes a line range covers, and the unified diff of the result.
#pragma once

#include <cstdint>
#include <string>

namespace dllm::cli {

struct LineRange {
  int64_t first = 0, last = 0;  // 1-based, inclusive
};

// "A-B" or "A". Throws dllm::Error naming --lines on anything else (0, B < A, not a number).
LineRange parse_line_range(const std::string& spec);

struct ByteRange {
  size_t begin = 0, end = 0;  // [begin, end) of the text, newlines of the lines included
};

// The bytes of lines first..last of `text`. Throws dllm::Error when the file has fewer lines.
ByteRange line_bytes(const std::string& text, const LineRange& lines);

// A unified diff (`diff -u` format, `context` lines around the one changed region) of `before` and `after`;
// empty when they are equal. `name` labels both sides ("--- NAME", "+++ NAME (rewritten)").
std::string unified_diff(const std::string& before, const std::string& after, const std::string& name,
                         int64_t context = 3);

}  // namespace dllm::cli
