// Text with GGUF files: the tokenizer.ggml.* vocabulary becomes a tokenizer.json for the one tokenizer
// implementation. A real Qwen3 vocabulary (151k tokens, 151k merges) stored the way llama.cpp's converter
// stores it must encode like its tokenizer.json; `dllm convert` of the demo model must round-trip its
// tokenizer; unsupported vocabularies fail naming the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "convert/gguf_convert.h"
#include "core/error.h"
#include "gguf_test_util.h"
#include "io/gguf.h"
#include "io/gguf_tokenizer_json.h"
#include "model/model_tokenizer.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace dllm {
namespace {

// What convert_hf_to_gguf.py stores for a byte-level BPE tokenizer.json: tokens by id, added tokens as
// control tokens, merges as "a b", the pre-tokenizer by name.
GgufTokenizer as_gguf(const nlohmann::json& tj, const std::string& pre) {
  GgufTokenizer g;
  g.model = "gpt2";
  g.pre = pre;
  int64_t n = 0;
  for (const auto& [text, id] : tj["model"]["vocab"].items()) n = std::max(n, id.get<int64_t>() + 1);
  for (const auto& a : tj["added_tokens"]) n = std::max(n, a["id"].get<int64_t>() + 1);
  g.tokens.assign(static_cast<size_t>(n), "");
  g.token_types.assign(static_cast<size_t>(n), GgufTokenizer::kNormal);
  for (const auto& [text, id] : tj["model"]["vocab"].items()) g.tokens[id.get<size_t>()] = text;
  for (const auto& a : tj["added_tokens"]) {
    g.tokens[a["id"].get<size_t>()] = a["content"];
    g.token_types[a["id"].get<size_t>()] = GgufTokenizer::kControl;
  }
  for (const auto& m : tj["model"]["merges"])
    g.merges.push_back(m.is_string() ? m.get<std::string>()
                                     : m[0].get<std::string>() + " " + m[1].get<std::string>());
  return g;
}

TEST(GgufTokenizer, Qwen3VocabularyEncodesLikeItsTokenizerJson) {
  const std::string dir = test::data_path("tokenizers/qwen3");
  const auto tj = test::read_json(dir + "/tokenizer.json");
  const Tokenizer want = Tokenizer::load(dir);
  const Tokenizer got =
      Tokenizer::from_json_text(tokenizer_json_from_gguf(as_gguf(tj, "qwen2"), "qwen3.gguf").dump());
  int checked = 0;
  std::istringstream lines(test::read_file(dir + "/sample.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const auto c = nlohmann::json::parse(line);
    const std::string text = c["text"];
    EXPECT_EQ(got.encode(text, false), want.encode(text, false)) << c["id"];
    const auto ids = want.encode(text, false);
    EXPECT_EQ(got.decode(ids, false), want.decode(ids, false)) << c["id"];
    ++checked;
  }
  EXPECT_GE(checked, 20);
  // Added (control) tokens are matched whole and skipped when decoding with skip_special_tokens.
  const auto ids = got.encode("<|im_start|>user\nhi<|im_end|>", false);
  EXPECT_EQ(ids, want.encode("<|im_start|>user\nhi<|im_end|>", false));
  EXPECT_EQ(got.decode(ids, true), want.decode(ids, true));
}

TEST(GgufTokenizer, ConvertedDemoModelRoundTripsItsTokenizer) {
  const std::string demo = std::string(DLLM_SOURCE_DIR) + "/models/demo";
  const std::string out = test::temp_path("demo_tokenizer.gguf");
  convert_hf_to_gguf(demo, out, GgmlType::kF32);
  const GgufFile file(out);
  EXPECT_EQ(read_gguf_tokenizer(file)->pre, "qwen2");  // the demo tokenizer splits with Qwen2's regex
  const Tokenizer want = Tokenizer::load(demo), got = load_model_tokenizer(out);
  for (const std::string text : {"def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1)\n",
                                 "x = 12345 + 0.5e-3  # ünïcödé ✓ 日本語", "<|endoftext|>a<|mdm_mask|> b",
                                 "  \n\n\t  trailing   ", "I'll we've THEY'RE it's", ""}) {
    EXPECT_EQ(got.encode(text, true), want.encode(text, true)) << text;
    EXPECT_EQ(got.decode(want.encode(text, false), false), text);
  }
  EXPECT_TRUE(has_model_tokenizer(out));
  std::filesystem::remove(out);
}

TEST(GgufTokenizer, UnsupportedVocabulariesNameTheKey) {
  GgufTokenizer g;
  g.model = "llama";
  g.tokens = {"a"};
  try {
    tokenizer_json_from_gguf(g, "m.gguf");
    FAIL() << "SentencePiece accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.gguf: tokenizer.ggml.model = 'llama'"), std::string::npos)
        << e.what();
  }
  g.model = "gpt2";
  g.pre = "falcon";
  try {
    tokenizer_json_from_gguf(g, "m.gguf");
    FAIL() << "unknown pre-tokenizer accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.pre = 'falcon'"), std::string::npos) << e.what();
  }
}

// A tokenizer that cannot be built is returned as the reason (naming the file and the key), not thrown: the
// model still runs on token ids. The oracle GGUF's placeholder vocabulary merges tokens it does not have.
TEST(GgufTokenizer, UnbuildableTokenizerIsAReasonNotAnError) {
  const std::string gguf = test::data_path("gguf/llada_tiny_f32.gguf");
  const ModelTokenizer broken = try_load_model_tokenizer(gguf, /*with_gguf_chat=*/true);
  EXPECT_FALSE(broken.tokenizer);
  EXPECT_FALSE(broken.gguf_chat);
  EXPECT_EQ(broken.error.rfind(gguf + ": tokenizer.ggml.merges[0]: ", 0), 0u) << broken.error;
  EXPECT_THROW(load_model_tokenizer(gguf), Error);
  const ModelTokenizer demo = try_load_model_tokenizer(std::string(DLLM_SOURCE_DIR) + "/models/demo");
  EXPECT_TRUE(demo.tokenizer);
  EXPECT_EQ(demo.error, "");
  const ModelTokenizer none = try_load_model_tokenizer(test::data_path("oracle/models/llada_tiny_f32"));
  EXPECT_FALSE(none.tokenizer);
  EXPECT_EQ(none.error, "");  // no tokenizer.json: nothing to warn about
}

TEST(GgufTokenizer, PreNamesAreFoundByRegex) {
  const auto tj = test::read_json(test::data_path("tokenizers/qwen3/tokenizer.json"));
  EXPECT_EQ(gguf_pre_name_for_regex(tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]), "qwen2");
  EXPECT_EQ(gguf_pre_name_for_regex("not a known regex"), "");
}

}  // namespace
}  // namespace dllm
