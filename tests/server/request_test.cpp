// Request validation and the left-to-right text stream of src/server (no HTTP: tests/server/run.sh does
// that).
#include "server/request.h"

#include <gtest/gtest.h>

#include "server/text_codec.h"

namespace dllm::server {
namespace {

using nlohmann::json;

ModelInfo tiny_info() {
  ModelInfo i;
  i.architecture = "llada";
  i.vocab_size = 512;
  i.max_seq_len = 256;
  i.mask_id = 500;
  i.eos_id = 481;
  return i;
}

struct Fixture : ::testing::Test {
  ModelInfo info = tiny_info();
  TextCodec codec = TextCodec::load("", info);
  RequestPolicy policy = [] {
    RequestPolicy p;
    p.model_id = "tiny";
    p.defaults.gen_length = 32;
    p.max_tokens = 128;
    return p;
  }();
  std::optional<ApiError> parse(const json& body, Endpoint e = Endpoint::kCompletions) {
    GenRequest r;
    return parse_request(body, e, codec, info, policy, r);
  }
};

TEST_F(Fixture, ValidRequestTakesDefaultsAndExtras) {
  GenRequest r;
  auto err = parse_request(json{{"model", "tiny"},
                                {"prompt", "1 2 3"},
                                {"steps", 16},
                                {"threshold", 0.8},
                                {"cache", "prefix"},
                                {"stop", "9"},
                                {"seed", 4}},
                           Endpoint::kCompletions, codec, info, policy, r);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.params.gen_length, 32);
  EXPECT_EQ(r.params.steps, 16);
  EXPECT_EQ(r.params.transfer, Transfer::kThreshold);
  EXPECT_EQ(r.params.cache, CacheMode::kPrefix);
  EXPECT_EQ(r.params.seed, 4u);
  EXPECT_EQ(r.stop, std::vector<std::string>{"9"});
}

TEST_F(Fixture, ErrorsNameTheField) {
  EXPECT_EQ(parse({{"prompt", "1"}, {"max_tokens", "x"}})->param, "max_tokens");
  EXPECT_EQ(parse({{"prompt", "1"}, {"max_tokens", 129}})->param, "max_tokens");
  EXPECT_EQ(parse({{"prompt", ""}})->param, "prompt");
  EXPECT_EQ(parse({{"prompt", "hello"}})->param, "prompt");   // ids codec: not a token id
  EXPECT_EQ(parse({{"prompt", {1, 999}}})->param, "prompt");  // outside the vocabulary
  EXPECT_EQ(parse({{"model", "other"}, {"prompt", "1"}})->param, "model");
  EXPECT_EQ(parse({{"prompt", "1"}, {"top_p", 0.5}})->param, "top_p");  // LLaDA has no nucleus filter
  EXPECT_EQ(parse({{"prompt", "1"}, {"logprobs", 3}})->param, "logprobs");
  EXPECT_EQ(parse({{"prompt", "1"}, {"whatever", 3}})->param, "whatever");
  EXPECT_EQ(parse({{"prompt", "1"}, {"max_tokens", 250}})->param, "max_tokens");  // over the context
  EXPECT_EQ(
      parse({{"messages", json::array({{{"role", "user"}, {"content", "1"}}})}}, Endpoint::kChat)->param,
      "messages");  // no chat template
  EXPECT_FALSE(parse({{"prompt", "1"}, {"logprobs", nullptr}, {"presence_penalty", 0}}));
}

TEST(PrefixStream, EmitsCommittedPrefixInOrderAndStopsAtEos) {
  ModelInfo info = tiny_info();
  TextCodec codec = TextCodec::load("", info);
  PrefixStream s(codec, {});
  const int32_t M = 500;
  EXPECT_EQ(s.advance(std::vector<int32_t>{M, 7, M, M}, false), "");
  EXPECT_EQ(s.advance(std::vector<int32_t>{5, 7, M, M}, false), "5 7");
  EXPECT_EQ(s.advance(std::vector<int32_t>{5, 7, 9, 481}, false), " 9");
  EXPECT_TRUE(s.done());
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.text(), "5 7 9");
  EXPECT_EQ(s.tokens(), 3);
}

TEST(PrefixStream, HoldsBackAPossibleStopString) {
  ModelInfo info = tiny_info();
  TextCodec codec = TextCodec::load("", info);
  PrefixStream s(codec, {"7 8"});
  const int32_t M = 500;
  EXPECT_EQ(s.advance(std::vector<int32_t>{5, 7, M, M}, false), "5 ");  // "7" could start "7 8"
  EXPECT_EQ(s.advance(std::vector<int32_t>{5, 7, 8, M}, false), "");
  EXPECT_TRUE(s.stop_string());
  EXPECT_EQ(s.text(), "5 ");
  PrefixStream t(codec, {"7 8"});
  EXPECT_EQ(t.advance(std::vector<int32_t>{5, 7, 9, 1}, true), "5 7 9 1");
  EXPECT_FALSE(t.stopped());
}

}  // namespace
}  // namespace dllm::server
