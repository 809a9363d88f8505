// NFC/NFD/NFKC/NFKD against Python's unicodedata (same Unicode version as the generated tables), and UTF-8
// helpers.
#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include "tokenizer/utf8.h"

namespace dllm::tok {
namespace {

TEST(Unicode, NormalizationMatchesPython) {
  auto rows = test::read_jsonl(test::tokenizer_dir("") + "unicode_norm.jsonl");
  ASSERT_GT(rows.size(), 1000u);
  EXPECT_EQ(rows[0]["unicode_version"].get<std::string>(), unicode_tables_version());
  int failures = 0;
  for (size_t i = 1; i < rows.size() && failures < 20; ++i) {
    const auto& r = rows[i];
    std::string s = r[0];
    const NormForm forms[] = {NormForm::NFC, NormForm::NFD, NormForm::NFKC, NormForm::NFKD};
    for (int f = 0; f < 4; ++f) {
      std::string got = unicode_normalize(s, forms[f]);
      std::string want = r[f + 1];
      if (got != want) {
        ++failures;
        ADD_FAILURE() << "row " << i << " form " << f << ": " << nlohmann::json(s).dump() << " -> "
                      << nlohmann::json(got).dump() << ", want " << nlohmann::json(want).dump();
      }
    }
  }
}

TEST(Unicode, AsciiIsUnchanged) {
  std::string s = "plain ASCII text\n\twith controls \x01\x7f";
  EXPECT_EQ(unicode_normalize(s, NormForm::NFKC), s);
  EXPECT_EQ(unicode_normalize("e\xCC\x81!", NormForm::NFC), "\xC3\xA9!");  // e + U+0301 -> U+00E9
}

TEST(Utf8, LossyLikeRust) {
  EXPECT_EQ(utf8_lossy("ok"), "ok");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");                          // truncated: one
  EXPECT_EQ(utf8_lossy("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // invalid leads
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(utf8_lossy("a\xE2\x82z"), "a\xEF\xBF\xBDz");
  EXPECT_TRUE(utf8_is_valid("\xF0\x9F\x98\x80"));
  EXPECT_FALSE(utf8_is_valid("\xF0\x9F\x98"));
}

TEST(Utf8, CompletePrefixHoldsBackOnlyIncompleteTails) {
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F\x98\x80"), 6u);
  EXPECT_EQ(utf8_complete_prefix("ab\xC3"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xFF"), 3u);  // can never become valid: not held back
}

}  // namespace
}  // namespace dllm::tok
