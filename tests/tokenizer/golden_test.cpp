// Exactness against reference encodings made with the official HF `tokenizers` library (npm
// tokenizers@0.23.2).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace dllm {
namespace {

const Tokenizer& get(const std::string& name) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, Tokenizer::load(test::tokenizer_dir(name))).first;
  return it->second;
}

struct GoldenCase {
  std::string tokenizer;
  std::string file;
};

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, MatchesReference) {
  const auto& p = GetParam();
  std::string path = test::tokenizer_dir(p.tokenizer) + "/" + p.file;
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  const Tokenizer& tok = get(p.tokenizer);
  auto samples = test::read_jsonl(path);
  ASSERT_FALSE(samples.empty());
  int failures = 0;
  for (const auto& s : samples) {
    std::string text = s["text"];
    std::string id = s.value("id", "?");
    auto ids = tok.encode(text, false);
    auto ids_special = tok.encode(text, true);
    auto want_ids = s["ids"].get<std::vector<int32_t>>();
    auto want_special = s["ids_special"].get<std::vector<int32_t>>();
    bool ok = true;
    ok &= ids == want_ids;
    ok &= ids_special == want_special;
    EXPECT_EQ(ids, want_ids) << id << " " << nlohmann::json(text).dump();
    EXPECT_EQ(ids_special, want_special) << id << " " << nlohmann::json(text).dump();
    EXPECT_EQ(tok.decode(want_ids, false), s["decoded"].get<std::string>()) << id;
    EXPECT_EQ(tok.decode(want_ids, true), s["decoded_skip"].get<std::string>()) << id;
    EXPECT_EQ(tok.decode(want_special, false), s["decoded_special"].get<std::string>()) << id;
    EXPECT_EQ(tok.decode(want_special, true), s["decoded_special_skip"].get<std::string>()) << id;
    if (!ok && ++failures > 20) break;
  }
}

std::vector<GoldenCase> cases() {
  std::vector<GoldenCase> out;
  for (const char* t : {"qwen3", "mistral7b", "gpt4o", "sp_metaspace", "sp_chain", "bl_prefix"}) {
    if (std::filesystem::exists(test::tokenizer_dir(t) + "/sample.jsonl")) out.push_back({t, "sample.jsonl"});
    if (std::filesystem::exists(test::tokenizer_dir(t) + "/extra.jsonl")) out.push_back({t, "extra.jsonl"});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Golden, ::testing::ValuesIn(cases()), [](const auto& info) {
  std::string f = info.param.file.substr(0, info.param.file.find('.'));
  return info.param.tokenizer + "_" + f;
});

// cases() keeps the sample files that exist: every tokenizer has its sample.jsonl, and qwen3 its extra.jsonl.
TEST(GoldenFiles, EveryTokenizerHasItsSamples) {
  EXPECT_GE(cases().size(), 7u);
}

}  // namespace
}  // namespace dllm
