// The text codec of a model whose own tokenizer cannot be built (the oracle GGUF's placeholder vocabulary):
// it serves token ids, and every use of text fails with the reason, naming the file and the key.
#include "server/text_codec.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "server/request.h"

namespace dllm::server {
namespace {

using nlohmann::json;

const std::string kGguf = std::string(DLLM_TEST_DATA) + "/gguf/llada_tiny_f32.gguf";

ModelInfo tiny_info() {
  ModelInfo i;
  i.architecture = "llada";
  i.vocab_size = 512;
  i.max_seq_len = 256;
  i.mask_id = 500;
  i.eos_id = 481;
  return i;
}

TEST(TextCodec, UnbuildableTokenizerServesIdsAndRefusesText) {
  const ModelInfo info = tiny_info();
  const TextCodec codec = TextCodec::load_if_present(kGguf, info);
  EXPECT_FALSE(codec.has_tokenizer());
  EXPECT_EQ(codec.kind(), "none");
  const std::string why = codec.tokenizer_error();
  EXPECT_NE(why.find("llada_tiny_f32.gguf"), std::string::npos) << why;
  EXPECT_NE(why.find("tokenizer.ggml.merges"), std::string::npos) << why;
  try {
    codec.encode("12 7", true);
    ADD_FAILURE() << "text was encoded without a tokenizer";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), why);
  }
  EXPECT_EQ(codec.decode(std::vector<int32_t>{12, 7}), "12 7");

  RequestPolicy policy;
  policy.model_id = "tiny";
  policy.defaults.gen_length = 8;
  policy.max_tokens = 64;
  GenRequest r;
  auto err = parse_request(json{{"prompt", {1, 2, 3}}}, Endpoint::kCompletions, codec, info, policy, r);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{1, 2, 3}));
  for (auto [endpoint, body] :
       {std::pair{Endpoint::kCompletions, json{{"prompt", "hi"}}},
        {Endpoint::kChat, json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}}}}) {
    err = parse_request(body, endpoint, codec, info, policy, r);
    ASSERT_TRUE(err);
    EXPECT_EQ(err->status, 400);
    EXPECT_NE(err->message.find(why), std::string::npos) << err->message;
  }
}

// Named explicitly (serve --tokenizer), a tokenizer that cannot be built stays an error.
TEST(TextCodec, ExplicitUnbuildableTokenizerThrows) {
  EXPECT_THROW(TextCodec::load(kGguf, tiny_info()), Error);
}

}  // namespace
}  // namespace dllm::server
