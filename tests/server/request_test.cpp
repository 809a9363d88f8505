// Request validation and the left-to-right text stream of src/server (no HTTP: tests/server/run.sh does
// that).
#include "server/request.h"

#include <gtest/gtest.h>

#include "denoise/strategy_names.h"
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

// Every word of every strategy axis through every request field that takes it (the tables of
// src/denoise/strategy_names.h, as the CLI flags take them); unknown words are a 400 naming the field and
// listing the words.
TEST_F(Fixture, EveryStrategyWordThroughEveryField) {
  auto parse_params = [&](const json& extra) {
    json body = {{"prompt", "1 2 3"}};
    body.update(extra);
    GenRequest r;
    auto err = parse_request(body, Endpoint::kCompletions, codec, info, policy, r);
    EXPECT_FALSE(err) << extra.dump() << ": " << err->message;
    return r.params;
  };
  for (auto key : unmask_axis().keys)
    for (const auto& w : unmask_axis().words) {
      const GenerateParams p = parse_params({{std::string(key), std::string(w.name)}});
      EXPECT_EQ(p.unmask, w.value.unmask) << key << " " << w.name;
      EXPECT_EQ(p.transfer, w.value.transfer) << key << " " << w.name;
    }
  for (const auto& w : transfer_axis().words)
    EXPECT_EQ(parse_params({{"schedule", std::string(w.name)}}).transfer, w.value) << w.name;
  for (const auto& w : sampler_axis().words)
    EXPECT_EQ(parse_params({{"sampler", std::string(w.name)}}).sampler, w.value) << w.name;
  for (const auto& w : cache_axis().words)
    EXPECT_EQ(parse_params({{"cache", std::string(w.name)}}).cache, w.value);
  // The chat endpoint knows the same fields.
  EXPECT_EQ(parse({{"messages", json::array()}, {"schedule", "factor"}}, Endpoint::kChat)->param, "messages");

  auto unknown = [&](const std::string& key, const std::string& accepted) {
    auto err = parse({{"prompt", "1"}, {key, "magic"}});
    ASSERT_TRUE(err) << key;
    EXPECT_EQ(err->status, 400);
    EXPECT_EQ(err->param, key);
    EXPECT_EQ(err->message, "'" + key + "': 'magic' is not one of " + accepted);
    const json body = error_body(*err);
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
    EXPECT_EQ(body["error"]["param"], key);
  };
  for (auto key : unmask_axis().keys) unknown(std::string(key), unmask_axis().accepted());
  unknown("schedule", transfer_axis().accepted());
  unknown("cache", cache_axis().accepted());
  EXPECT_EQ(parse({{"prompt", "1"}, {"alg", "origin"}, {"unmask", "margin"}})->param, "alg");
  EXPECT_EQ(parse({{"prompt", "1"}, {"threshold", 0.5}, {"factor", 1}})->param, "factor");
  EXPECT_EQ(parse({{"prompt", "1"}, {"threshold", 0.5}, {"schedule", "uniform"}})->param, "threshold");
}

// The server's defaults (dllm serve's flags) stay unless a request names the axis.
TEST_F(Fixture, RequestWordsOverrideOnlyTheirAxis) {
  policy.defaults.transfer = Transfer::kThreshold;
  policy.defaults.cache = CacheMode::kDual;
  GenRequest r;
  ASSERT_FALSE(parse_request({{"prompt", "1"}, {"remasking", "random"}}, Endpoint::kCompletions, codec, info,
                             policy, r));
  EXPECT_EQ(r.params.unmask, Unmask::kRandom);
  EXPECT_EQ(r.params.transfer, Transfer::kThreshold);
  EXPECT_EQ(r.params.cache, CacheMode::kDual);
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
