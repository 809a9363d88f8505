#include "rewrite_text.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "core/error.h"

namespace dllm::cli {
namespace {

int64_t parse_line_number(const std::string& spec, std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 1)
    fail("--lines '", spec, "': expected A-B with 1 <= A <= B (line numbers, 1-based)");
  return v;
}

// The text split after each newline; a last line without one is a line too.
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    const size_t end = nl == std::string::npos ? text.size() : nl + 1;
    lines.push_back(text.substr(at, end - at));
    at = end;
  }
  return lines;
}

}  // namespace

LineRange parse_line_range(const std::string& spec) {
  const size_t dash = spec.find('-');
  LineRange r;
  if (dash == std::string::npos) {
    r.first = r.last = parse_line_number(spec, spec);
  } else {
    r.first = parse_line_number(spec, std::string_view(spec).substr(0, dash));
    r.last = parse_line_number(spec, std::string_view(spec).substr(dash + 1));
  }
  if (r.last < r.first) fail("--lines '", spec, "': the last line is before the first");
  return r;
}

ByteRange line_bytes(const std::string& text, const LineRange& lines) {
  const auto all = split_lines(text);
  if (lines.last > static_cast<int64_t>(all.size()))
    fail("--lines ", lines.first, "-", lines.last, ": the file has ", all.size(), " line(s)");
  ByteRange r;
  for (int64_t i = 0; i < lines.last; ++i) {
    if (i < lines.first - 1) r.begin += all[i].size();
    r.end += all[i].size();
  }
  return r;
}

std::string unified_diff(const std::string& before, const std::string& after, const std::string& name,
                         int64_t context) {
  const auto a = split_lines(before), b = split_lines(after);
  const int64_t na = static_cast<int64_t>(a.size()), nb = static_cast<int64_t>(b.size());
  int64_t head = 0;
  while (head < na && head < nb && a[head] == b[head]) ++head;
  if (head == na && head == nb) return "";
  int64_t tail = 0;
  while (tail < na - head && tail < nb - head && a[na - 1 - tail] == b[nb - 1 - tail]) ++tail;
  const int64_t from = std::max<int64_t>(0, head - context);
  const int64_t a_to = std::min(na, na - tail + context), b_to = std::min(nb, nb - tail + context);
  // As GNU diff -u: an empty side's range is numbered from the line before it, a count of 1 is left out.
  auto range = [](int64_t start, int64_t count) {
    if (count == 1) return std::to_string(start + 1);
    return std::to_string(count == 0 ? start : start + 1) + "," + std::to_string(count);
  };
  std::string out = "--- " + name + "\n+++ " + name + " (rewritten)\n@@ -" + range(from, a_to - from) + " +" +
                    range(from, b_to - from) + " @@\n";
  auto emit = [&out](char mark, const std::string& line) {
    out += mark;
    out += line;
    if (line.empty() || line.back() != '\n') out += "\n\\ No newline at end of file\n";
  };
  for (int64_t i = from; i < head; ++i) emit(' ', a[i]);
  for (int64_t i = head; i < na - tail; ++i) emit('-', a[i]);
  for (int64_t i = head; i < nb - tail; ++i) emit('+', b[i]);
  for (int64_t i = na - tail; i < a_to; ++i) emit(' ', a[i]);
  return out;
}

}  // namespace dllm::cli
