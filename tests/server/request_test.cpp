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

TEST(PrefixStream, TakesOnlyTheFinalPrefix) {
  // LLaDA2.1 edits decoded tokens of its current block: only the final prefix may be streamed.
  ModelInfo info = tiny_info();
  TextCodec codec = TextCodec::load("", info);
  PrefixStream s(codec, {});
  const int32_t M = 500;
  EXPECT_EQ(s.advance(std::vector<int32_t>{5, 7, 9, M}, false, 0), "");
  EXPECT_EQ(s.advance(std::vector<int32_t>{5, 8, 9, M}, false, 2), "5 8");  // 7 was edited to 8
  EXPECT_EQ(s.advance(std::vector<int32_t>{5, 8, 3, 2}, true), " 3 2");
  EXPECT_EQ(s.text(), "5 8 3 2");
}

TEST(PrefixStream, TakesTheRequestsOwnIds) {
  ModelInfo info = tiny_info();
  TextCodec codec = TextCodec::load("", info);
  PrefixStream s(codec, {}, /*mask_id=*/9, /*eos_id=*/3);
  EXPECT_EQ(s.advance(std::vector<int32_t>{5, 500, 9, 9}, false), "5 500");
  EXPECT_EQ(s.advance(std::vector<int32_t>{5, 500, 7, 3}, false), " 7");
  EXPECT_TRUE(s.stopped());
}

TEST(PrefixStream, StopsAfterAStopId) {
  ModelInfo info = tiny_info();
  TextCodec codec = TextCodec::load("", info);
  PrefixStream s(codec, {});
  s.stop_after({7});  // SDAR stop_ids: the output keeps the stop id
  EXPECT_EQ(s.advance(std::vector<int32_t>{5, 7, 9, 500}, false), "5 7");
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.tokens(), 2);
}

// The block-diffusion knobs: the CLI's names (--block-loop ...), 400s naming the field.
struct BlockFixture : Fixture {
  BlockFixture() {
    info.architecture = "llada2";
    info.block_size = 32;
    policy.defaults.stop_at_eos = true;  // dllm serve's default: not offered by the block loops
  }
};

TEST_F(BlockFixture, BlockFieldsReachTheParams) {
  GenRequest r;
  auto err = parse_request(json{{"prompt", "1 2 3"},
                                {"block_loop", "llada2.0"},
                                {"minimal_topk", 2},
                                {"eos_early_stop", true},
                                {"editing_threshold", 0.5},
                                {"max_post_steps", 4},
                                {"num_to_transfer", 3},
                                {"stop_ids", {7, 9}},
                                {"mask_id", 503},
                                {"eos_id", 501}},
                           Endpoint::kCompletions, codec, info, policy, r);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(r.params.block_loop, BlockLoop::kLlada20);
  EXPECT_EQ(r.params.minimal_topk, 2);
  EXPECT_TRUE(r.params.eos_early_stop);
  EXPECT_EQ(r.params.editing_threshold, 0.5);
  EXPECT_EQ(r.params.max_post_steps, 4);
  EXPECT_EQ(r.params.num_to_transfer, 3);
  EXPECT_EQ(r.params.stop_ids, (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(r.params.mask_id, 503);
  EXPECT_EQ(r.params.eos_id, 501);
  EXPECT_FALSE(r.params.stop_at_eos) << "the server's --stop-at-eos is not the block loops'";

  ASSERT_FALSE(parse_request(json{{"prompt", "1 2 3"}, {"stop_ids", json::array()}}, Endpoint::kCompletions,
                             codec, info, policy, r));
  EXPECT_EQ(r.params.stop_ids, std::vector<int32_t>{}) << "[]: never stop early (the SDAR reference's None)";
  ASSERT_FALSE(parse_request(json{{"prompt", "1 2 3"}}, Endpoint::kCompletions, codec, info, policy, r));
  EXPECT_FALSE(r.params.stop_ids.has_value());
  EXPECT_EQ(r.params.block_loop, BlockLoop::kDefault);
}

TEST_F(BlockFixture, BadBlockFieldsAre400sNamingTheField) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"block_loop", "llada3"}}, "block_loop"},
      {{{"block_loop", 2}}, "block_loop"},
      {{{"minimal_topk", 0}}, "minimal_topk"},
      {{{"eos_early_stop", "yes"}}, "eos_early_stop"},
      {{{"editing_threshold", 1.5}}, "editing_threshold"},
      {{{"editing_threshold", -0.1}}, "editing_threshold"},
      {{{"max_post_steps", -1}}, "max_post_steps"},
      {{{"num_to_transfer", 0}}, "num_to_transfer"},
      {{{"stop_ids", "none"}}, "stop_ids"},
      {{{"stop_ids", {1, 512}}}, "stop_ids"},
      {{{"stop_ids", {1, -2}}}, "stop_ids"},
      {{{"mask_id", 512}}, "mask_id"},
      {{{"eos_id", -1}}, "eos_id"},
      {{{"stop_at_eos", true}}, "stop_at_eos"},
  };
  for (const auto& [extra, param] : cases) {
    json body = {{"prompt", "1 2 3"}};
    body.update(extra);
    auto err = parse(body);
    ASSERT_TRUE(err) << body.dump();
    EXPECT_EQ(err->status, 400);
    EXPECT_EQ(err->param, param) << body.dump() << ": " << err->message;
    EXPECT_NE(err->message.find(param), std::string::npos) << err->message;
  }
  auto err = parse({{"prompt", "1 2 3"}, {"block_loop", "llada3"}});
  ASSERT_TRUE(err);
  EXPECT_NE(err->message.find("llada2.1"), std::string::npos) << "lists the accepted words: " << err->message;
}

TEST_F(Fixture, BlockFieldsOnABidirectionalModelAre400s) {
  for (const char* name : {"block_loop", "minimal_topk", "eos_early_stop", "editing_threshold",
                           "max_post_steps", "num_to_transfer", "stop_ids"}) {
    json body = {{"prompt", "1 2 3"}, {name, nullptr}};
    EXPECT_FALSE(parse(body)) << "null reads as absent: " << name;
    body[name] = std::string(name) == "stop_ids" ? json::array() : json(1);
    auto err = parse(body);
    ASSERT_TRUE(err) << name;
    EXPECT_EQ(err->param, name);
    EXPECT_NE(err->message.find("block-diffusion"), std::string::npos) << err->message;
  }
}

// An autoregressive model (qwen2, qwen3, llama): the OpenAI fields, top_k, top_p and stop_ids; every
// diffusion-only field is a 400 naming it (not silently ignored), and so is an infill suffix.
struct ArFixture : Fixture {
  ArFixture() {
    info.architecture = "qwen2";
    info.autoregressive = true;
    info.mask_id = -1;
    info.eos_id = 481;
    info.eog_ids = {481, 482};
    codec = TextCodec::load("", info);
    policy.model_id = "qwen";
    policy.defaults = GenerateParams{};
    policy.defaults.gen_length = 16;
  }
};

TEST_F(ArFixture, SamplingFieldsReachTheParams) {
  GenRequest r;
  auto err = parse_request(json{{"model", "qwen"},
                                {"prompt", "1 2 3"},
                                {"max_tokens", 8},
                                {"temperature", 0.7},
                                {"top_p", 0.9},
                                {"top_k", 20},
                                {"seed", 5},
                                {"n", 2},
                                {"stop", "9"}},
                           Endpoint::kCompletions, codec, info, policy, r);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(r.params.gen_length, 8);
  EXPECT_EQ(r.params.temperature, 0.7);
  EXPECT_EQ(r.params.top_p, 0.9) << "the token sampler has a nucleus filter";
  EXPECT_EQ(r.params.top_k, 20);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.end_ids, (std::vector<int32_t>{481, 482})) << "the model's end-of-generation ids";
  EXPECT_FALSE(r.infill);
  ASSERT_FALSE(parse_request(json{{"prompt", "1"}, {"stop_ids", {7}}}, Endpoint::kCompletions, codec, info,
                             policy, r));
  EXPECT_EQ(r.end_ids, std::vector<int32_t>{7});
  // The router's choice: model "auto" is accepted by the model it chose.
  EXPECT_FALSE(parse({{"model", "auto"}, {"prompt", "1"}}));
  EXPECT_EQ(parse({{"model", "demo"}, {"prompt", "1"}})->code, "model_not_found");
}

TEST_F(ArFixture, DiffusionOnlyFieldsAre400sNamingTheField) {
  EXPECT_FALSE(diffusion_only_fields().empty());
  for (const std::string& name : diffusion_only_fields()) {
    json body = {{"prompt", "1 2 3"}, {name, nullptr}};
    EXPECT_FALSE(parse(body)) << "null reads as absent: " << name;
    for (json value : {json(1), json(true), json("word"), json(false)}) {
      body[name] = value;
      auto err = parse(body);
      ASSERT_TRUE(err) << name << " = " << value.dump();
      EXPECT_EQ(err->status, 400);
      EXPECT_EQ(err->param, name);
      EXPECT_NE(err->message.find("'" + name +
                                  "' applies to diffusion models only; 'qwen' is an autoregressive "
                                  "model (qwen2)"),
                std::string::npos)
          << err->message;
    }
  }
  for (const char* name :
       {"steps", "block_length", "threshold", "diffusing", "remasking", "cache", "cfg_scale"})
    EXPECT_NE(std::find(diffusion_only_fields().begin(), diffusion_only_fields().end(), name),
              diffusion_only_fields().end())
        << name;
  auto err = parse({{"messages", json::array({{{"role", "user"}, {"content", "1"}}})}, {"steps", 4}},
                   Endpoint::kChat);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "steps") << "chat too";
}

TEST_F(ArFixture, SuffixIsA400) {
  auto err = parse({{"prompt", "1 2"}, {"suffix", "3 4"}});
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "suffix");
  EXPECT_NE(err->message.find("needs a diffusion model"), std::string::npos) << err->message;
  EXPECT_FALSE(parse({{"prompt", "1 2"}, {"suffix", ""}})) << "an empty suffix is no infill";
}

// /v1/completions `suffix` on a diffusion model: infill between prompt and suffix.
TEST_F(Fixture, SuffixMakesAnInfillRequest) {
  policy.defaults.stop_at_eos = true;  // dllm serve's default, which infill does not take
  GenRequest r;
  auto err = parse_request(json{{"prompt", "1 2"}, {"suffix", "7 8 9"}, {"max_tokens", 8}},
                           Endpoint::kCompletions, codec, info, policy, r);
  ASSERT_FALSE(err) << err->message;
  EXPECT_TRUE(r.infill);
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(r.suffix, (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(r.params.gen_length, 8);
  EXPECT_FALSE(r.params.stop_at_eos);
  EXPECT_EQ(parse({{"prompt", "1"}, {"suffix", 3}})->param, "suffix");
  EXPECT_EQ(parse({{"prompt", "1"}, {"suffix", "hello"}})->param, "suffix");  // ids codec: not a token id
  EXPECT_EQ(parse({{"prompt", "1"}, {"suffix", "2"}, {"stop_at_eos", true}})->param, "stop_at_eos");
  std::string long_suffix;
  for (int i = 0; i < 130; ++i) long_suffix += "2 ";
  auto over = parse({{"prompt", "1"}, {"suffix", long_suffix}, {"max_tokens", 128}});
  ASSERT_TRUE(over) << "prompt + masks + suffix over the context of 256";
  EXPECT_EQ(over->param, "max_tokens");
  EXPECT_NE(over->message.find("the prompt and suffix (131 tokens)"), std::string::npos) << over->message;
  EXPECT_EQ(parse({{"messages", json::array({{{"role", "user"}, {"content", "1"}}})}, {"suffix", "2"}},
                  Endpoint::kChat)
                ->param,
            "suffix")
      << "chat has no suffix";
}

TEST_F(BlockFixture, SuffixIsA400) {
  EXPECT_EQ(parse({{"prompt", "1"}, {"suffix", "2"}})->param, "suffix");
}

TEST(PrefixStream, EndsAtTheGivenEndIds) {
  ModelInfo info = tiny_info();
  TextCodec codec = TextCodec::load("", info);
  PrefixStream s(codec, {});
  s.end_at({7});  // an autoregressive model's other end-of-generation id: not in the text
  EXPECT_EQ(s.advance(std::vector<int32_t>{5, 6, 7, 8}, false), "5 6");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.tokens(), 2);
}

}  // namespace
}  // namespace dllm::server

namespace dllm::server {
namespace {

// /v1/canvas: placeholders or code-point spans -> the canvas (pieces' ids, spans as masks or kept tokens).
TEST_F(Fixture, CanvasPlaceholdersMakeMaskedSpans) {
  GenRequest r;
  auto err = parse_request(json{{"text", "1 2 <|mask:3|> 7 <|mask|> 9"}, {"refine", 2}}, Endpoint::kCanvas,
                           codec, info, policy, r);
  ASSERT_FALSE(err) << err->message;
  const auto& d = r.doc;
  EXPECT_EQ(d.texts, (std::vector<std::string>{"1 2 ", " 7 ", " 9"}));
  const int32_t m = 500;
  std::vector<int32_t> ids = {1, 2, m, m, m, 7};
  ids.insert(ids.end(), 16, m);  // a bare <|mask|> is 16 tokens, as in dllm infill
  ids.push_back(9);
  EXPECT_EQ(d.ids, ids);
  std::vector<uint8_t> editable;
  for (int32_t id : ids) editable.push_back(id == m);
  EXPECT_EQ(d.editable, editable);
  EXPECT_EQ(d.span_begin, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(d.span_length, (std::vector<int64_t>{3, 16}));
  EXPECT_EQ(d.rounds, 2);
  EXPECT_FALSE(d.refine_only);
  EXPECT_FALSE(r.params.stop_at_eos);
  EXPECT_EQ(r.params.gen_length, 19);
}

TEST_F(Fixture, CanvasSpansAreCodePointRanges) {
  GenRequest r;
  // "1 2 3 4 5": code points 4..7 are "3 4"; redo keeps the span's token count unless `length` says.
  auto err = parse_request(json{{"text", "1 2 3 4 5"}, {"spans", {{{"start", 4}, {"end", 7}}}}},
                           Endpoint::kCanvas, codec, info, policy, r);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(r.doc.texts, (std::vector<std::string>{"1 2 ", " 5"}));
  EXPECT_EQ(r.doc.ids, (std::vector<int32_t>{1, 2, 500, 500, 5}));
  r = GenRequest{};
  err = parse_request(json{{"text", "1 2 3 4 5"}, {"spans", {{{"start", 4}, {"end", 7}, {"length", 4}}}}},
                      Endpoint::kCanvas, codec, info, policy, r);
  ASSERT_FALSE(err) << err->message;
  EXPECT_EQ(r.doc.ids, (std::vector<int32_t>{1, 2, 500, 500, 500, 500, 5}));
  r = GenRequest{};
  err =
      parse_request(json{{"text", "1 2 3 4 5"}, {"mode", "refine"}, {"spans", {{{"start", 4}, {"end", 7}}}}},
                    Endpoint::kCanvas, codec, info, policy, r);
  ASSERT_FALSE(err) << err->message;
  EXPECT_TRUE(r.doc.refine_only);
  EXPECT_EQ(r.doc.rounds, 1);
  EXPECT_EQ(r.doc.ids, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(r.doc.editable, (std::vector<uint8_t>{0, 0, 1, 1, 0}));
}

TEST_F(Fixture, CanvasErrorsNameTheField) {
  auto canvas = [&](const json& body) { return parse(body, Endpoint::kCanvas); };
  EXPECT_EQ(canvas({{"prompt", "1"}})->param, "prompt");  // not a canvas field
  EXPECT_EQ(canvas({{"refine", 1}})->param, "text");
  EXPECT_EQ(canvas({{"text", "1 2 3"}})->param, "text");  // nothing to edit
  EXPECT_EQ(canvas({{"text", "1 <|mask:2|>"}, {"max_tokens", 4}})->param, "max_tokens");
  EXPECT_EQ(canvas({{"text", "1 <|mask:2|>"}, {"stop", "3"}})->param, "stop");
  EXPECT_EQ(canvas({{"text", "1 <|mask:2|>"}, {"n", 2}})->param, "n");
  EXPECT_EQ(canvas({{"text", "1 <|mask:2|>"}, {"mode", "rewrite"}})->param, "mode");
  EXPECT_EQ(canvas({{"text", "1 <|mask:2|>"}, {"mode", "refine"}})->param, "mode");  // refine needs spans
  EXPECT_EQ(canvas({{"text", "1 <|mask:2|>"}, {"refine", 65}})->param, "refine");
  EXPECT_EQ(canvas({{"text", "1 <|mask:2|>"}, {"spans", {{{"start", 0}, {"end", 1}}}}})->param, "spans");
  EXPECT_EQ(canvas({{"text", "1 2"}, {"spans", json::array()}})->param, "spans");
  EXPECT_EQ(canvas({{"text", "1 2"}, {"spans", {{{"start", 2}, {"end", 1}}}}})->param, "spans");
  EXPECT_EQ(canvas({{"text", "1 2"}, {"spans", {{{"start", 0}, {"end", 9}}}}})->param,
            "spans");  // past the end
  EXPECT_EQ(canvas({{"text", "1 2"}, {"spans", {{{"start", 1}, {"end", 1}}}}})->param, "spans");  // empty
  EXPECT_EQ(
      canvas({{"text", "1 2 3"}, {"spans", {{{"start", 0}, {"end", 3}}, {{"start", 2}, {"end", 4}}}}})->param,
      "spans");  // overlap
  EXPECT_EQ(canvas({{"text", "1 2"}, {"spans", {{{"start", 0}, {"end", 1}, {"color", 1}}}}})->param, "spans");
  EXPECT_EQ(
      canvas({{"text", "1 2"}, {"mode", "refine"}, {"spans", {{{"start", 0}, {"end", 1}, {"length", 3}}}}})
          ->param,
      "spans");
  EXPECT_EQ(canvas({{"text", "500 <|mask|>"}})->param, "text");  // the mask id outside a span
  // Found by the request fuzzer: a malformed placeholder beside spans was an exception (a 500), not a 400.
  EXPECT_EQ(canvas({{"text", "1 2 <|mask:65"}, {"spans", {{{"start", 0}, {"end", 1}}}}})->param, "text");
  EXPECT_EQ(canvas({{"text", "1 <|mask:200|>"}})->param, "spans");  // over max_tokens (128)
  const auto over = canvas({{"text", "1 <|mask:2|> 999"}});
  ASSERT_TRUE(over);
  EXPECT_EQ(over->param, "text");  // outside the vocabulary
  EXPECT_FALSE(canvas({{"text", "1 <|mask:2|>"}, {"refine", 3}, {"refine_tokens", 1}, {"stream", true}}));
}

// Block-diffusion models take canvas edits (LLaDA2.1's editing loop); their refine rounds have no k.
TEST_F(BlockFixture, CanvasRefineHasNoTokenCount) {
  EXPECT_FALSE(parse({{"text", "1 <|mask:2|>"}, {"refine", 2}}, Endpoint::kCanvas));
  auto err = parse({{"text", "1 <|mask:2|>"}, {"refine", 2}, {"refine_tokens", 1}}, Endpoint::kCanvas);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "refine_tokens");
  EXPECT_NE(err->message.find("editing passes"), std::string::npos) << err->message;
}

TEST_F(ArFixture, CanvasIsA400) {
  EXPECT_EQ(parse({{"text", "1 <|mask:2|>"}}, Endpoint::kCanvas)->param, "model");
}

// A uniform-state canvas model (DiffusionGemma: policy.canvas_length > 0): max_tokens, seed, n, stop and its
// sampler's fields by the reference's names reach the params over the model's generation_config.json; the
// masked-diffusion fields and the OpenAI sampling fields it has no counterpart for are 400s naming the field.
struct UniformFixture : Fixture {
  UniformFixture() {
    info.architecture = "diffusion_gemma";
    info.mask_id = -1;
    info.eos_id = 1;
    info.eog_ids = {1, 106, 50};
    info.max_seq_len = 64;
    codec = TextCodec::load("", info);
    policy.model_id = "dgemma";
    policy.canvas_length = 16;
    policy.defaults = GenerateParams{};
    policy.defaults.gen_length = 32;
    policy.defaults.seed = 3;
    UniformStateParams& g = policy.defaults.uniform_state;  // as generation_config.json
    g.max_new_tokens = 256;
    g.max_denoising_steps = 48;
    g.t_min = 0.4;
    g.t_max = 0.8;
    g.entropy_bound = 0.1;
    g.stability_threshold = 1;
    g.confidence_threshold = 0.005;
  }
};

TEST_F(UniformFixture, SamplerFieldsReachTheParams) {
  GenRequest r;
  auto err = parse_request(json{{"model", "dgemma"},
                                {"prompt", {2, 339, 406}},
                                {"max_tokens", 20},
                                {"max_denoising_steps", 8},
                                {"t_min", 0.2},
                                {"t_max", 0.9},
                                {"entropy_bound", 0.5},
                                {"stability_threshold", 2},
                                {"confidence_threshold", 0.01},
                                {"seed", 7},
                                {"n", 2},
                                {"stop", "9"},
                                {"stream", true},
                                {"diffusing", true}},
                           Endpoint::kCompletions, codec, info, policy, r);
  ASSERT_FALSE(err) << err->message;
  const UniformStateParams& u = r.params.uniform_state;
  EXPECT_EQ(r.params.gen_length, 20);
  EXPECT_EQ(u.max_new_tokens, 20) << "max_tokens is max_new_tokens";
  EXPECT_EQ(u.max_length, 3 + 20) << "the reference's max_length (at 256 new tokens) says the same";
  EXPECT_EQ(u.max_denoising_steps, 8);
  EXPECT_EQ(u.t_min, 0.2);
  EXPECT_EQ(u.t_max, 0.9);
  EXPECT_EQ(u.entropy_bound, 0.5);
  EXPECT_EQ(u.stability_threshold, 2);
  EXPECT_EQ(u.confidence_threshold, 0.01);
  EXPECT_EQ(r.params.seed, 7u);
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.diffusing);
  EXPECT_EQ(r.end_ids, (std::vector<int32_t>{1, 106, 50})) << "any EOS id ends the text";
  // Absent: the server's max_tokens and seed, the model's sampler settings.
  ASSERT_FALSE(parse_request(json{{"prompt", "2 3"}}, Endpoint::kCompletions, codec, info, policy, r));
  EXPECT_EQ(r.params.uniform_state.max_new_tokens, 32);
  EXPECT_EQ(r.params.uniform_state.max_denoising_steps, 48);
  EXPECT_EQ(r.params.uniform_state.t_max, 0.8);
  EXPECT_EQ(r.params.seed, 3u);
  EXPECT_FALSE(parse({{"prompt", "2"}, {"top_p", 1}, {"suffix", ""}, {"temperature", nullptr}}))
      << "top_p 1, an empty suffix and null are no settings";
}

TEST_F(UniformFixture, InapplicableAndBadFieldsAre400sNamingTheField) {
  auto expect = [&](const json& extra, const std::string& param, const std::string& words,
                    Endpoint e = Endpoint::kCompletions) {
    json body = e == Endpoint::kCanvas ? json::object() : json{{"prompt", "2 3"}};
    body.update(extra);
    auto err = parse(body, e);
    ASSERT_TRUE(err) << extra.dump();
    EXPECT_EQ(err->status, 400);
    EXPECT_EQ(err->param, param) << extra.dump();
    EXPECT_NE(err->message.find(words), std::string::npos) << err->message;
  };
  // Every masked-diffusion field, by name.
  for (const std::string& name : diffusion_only_fields()) {
    if (diffusion_field_applies(name, /*uniform_state=*/true)) continue;
    expect({{name, 4}}, name, "'" + name + "' does not apply to 'dgemma', a uniform-state canvas model");
  }
  expect({{"steps", 4}}, "steps", "'max_denoising_steps'");
  expect({{"temperature", 0.5}}, "temperature", "falls from 't_max' to 't_min'");
  expect({{"top_k", 5}}, "top_k", "does not apply");
  expect({{"stop_ids", {1}}}, "stop_ids", "does not apply");
  expect({{"top_p", 0.5}}, "top_p", "no nucleus filter");
  expect({{"suffix", "4 5"}}, "suffix", "no mask token to infill with");
  // Its own fields: wrong types and values.
  expect({{"t_min", "hot"}}, "t_min", "'t_min' must be a number, got a string");
  expect({{"t_max", 0}}, "t_max", "'t_max' must be in (0");
  expect({{"max_denoising_steps", 0.5}}, "max_denoising_steps", "must be an integer");
  expect({{"max_denoising_steps", 0}}, "max_denoising_steps", "must be in [1, ");
  expect({{"entropy_bound", -1}}, "entropy_bound", "must be in (0.0, ");
  expect({{"stability_threshold", 5000}}, "stability_threshold", "must be in [0, 1024]");
  expect({{"confidence_threshold", true}}, "confidence_threshold", "must be a number, got a boolean");
  expect({{"t_min", 0.9}}, "t_min", "got t_min 0.9 and t_max 0.8 (the model's)");
  expect({{"t_max", 0.3}}, "t_max", "got t_min 0.4 (the model's) and t_max 0.3");
  // Whole canvases must fit the context: 20 tokens run as 2 canvases of 16.
  expect({{"prompt", std::vector<int>(40, 2)}, {"max_tokens", 20}}, "max_tokens", "run as 2 canvases of 16");
  expect({{"text", "2 <|mask:2|>"}}, "model", "no mask token", Endpoint::kCanvas);
}

// A masked diffusion model and an autoregressive one refuse the uniform-state fields by name.
TEST_F(Fixture, UniformStateFieldsOnAMaskedModelAre400s) {
  for (const std::string& name : uniform_state_fields()) {
    auto err = parse({{"prompt", "1"}, {name, 1}});
    ASSERT_TRUE(err) << name;
    EXPECT_EQ(err->param, name);
    EXPECT_NE(err->message.find("uniform-state canvas models (DiffusionGemma) only"), std::string::npos)
        << err->message;
    EXPECT_NE(std::find(diffusion_only_fields().begin(), diffusion_only_fields().end(), name),
              diffusion_only_fields().end())
        << name << ": an autoregressive model refuses it too (DiffusionOnlyFieldsAre400sNamingTheField)";
  }
}

}  // namespace
}  // namespace dllm::server
