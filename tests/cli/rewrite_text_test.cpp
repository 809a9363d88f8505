// `dllm rewrite`'s text helpers: line ranges to bytes, and the unified diff (compared with what `diff -u`
// prints for the same files).
#include "rewrite_text.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dllm::cli {
namespace {

TEST(RewriteText, ParsesLineRanges) {
  EXPECT_EQ(parse_line_range("3-5").first, 3);
  EXPECT_EQ(parse_line_range("3-5").last, 5);
  EXPECT_EQ(parse_line_range("7").first, 7);
  EXPECT_EQ(parse_line_range("7").last, 7);
  for (const char* bad : {"0-2", "5-3", "a-b", "", "-", "2-", "1-2-3", "1.5"})
    EXPECT_THROW(parse_line_range(bad), Error) << bad;
}

TEST(RewriteText, LineBytesCoverWholeLines) {
  const std::string t = "a\nbb\nccc\nd";
  const auto r = line_bytes(t, {2, 3});
  EXPECT_EQ(t.substr(r.begin, r.end - r.begin), "bb\nccc\n");
  const auto last = line_bytes(t, {4, 4});
  EXPECT_EQ(t.substr(last.begin, last.end - last.begin), "d");  // no newline at the end of the file
  EXPECT_THROW(line_bytes(t, {4, 5}), Error);
}

TEST(RewriteText, UnifiedDiffAsDiffU) {
  EXPECT_EQ(unified_diff("a\nb\n", "a\nb\n", "f"), "");
  // diff -u <(printf '1\n2\n3\n4\n5\n6\n7\n8\n') <(printf '1\n2\n3\n4\nX\nY\n6\n7\n8\n')
  EXPECT_EQ(unified_diff("1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\nX\nY\n6\n7\n8\n", "f"),
            "--- f\n+++ f (rewritten)\n@@ -2,7 +2,8 @@\n 2\n 3\n 4\n-5\n+X\n+Y\n 6\n 7\n 8\n");
  // A deletion at the start: the empty side is numbered from the line before it.
  EXPECT_EQ(unified_diff("1\n2\n", "2\n", "f", 0), "--- f\n+++ f (rewritten)\n@@ -1 +0,0 @@\n-1\n");
  EXPECT_EQ(unified_diff("1\n2", "1\n3", "f", 1),
            "--- f\n+++ f (rewritten)\n@@ -1,2 +1,2 @@\n 1\n-2\n\\ No newline at end of file\n+3\n"
            "\\ No newline at end of file\n");
}

}  // namespace
}  // namespace dllm::cli
