// The router behind model "auto" as a pure function (src/server/router.h): what it reads of a request body
// and where each rule sends it, without HTTP (tests/server/hybrid.test.mjs sends the same mix through a
// server).
#include "server/router.h"

#include <gtest/gtest.h>

namespace dllm::server {
namespace {

using nlohmann::json;

const std::vector<RouteTarget> kBoth = {{"demo", ModelKind::kDiffusion},
                                        {"qwen", ModelKind::kAutoregressive}};

RouteDecision route_chat(const json& body, const std::vector<RouteTarget>& targets = kBoth,
                         const RouterConfig& config = {}) {
  return route(route_features(body, /*chat=*/true, /*default_max_tokens=*/64), targets, config);
}

json chat(const std::string& text, json extra = json::object()) {
  json body = {{"model", "auto"}, {"messages", {{{"role", "user"}, {"content", text}}}}};
  body.update(extra);
  return body;
}

TEST(RouteFeatures, ReadsChatBodies) {
  json body = {
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "user"}, {"content", "first question"}},
        {{"role", "assistant"}, {"content", "an answer"}},
        {{"role", "user"},
         {"content", {{{"type", "text"}, {"text", "Rewrite "}}, {{"type", "text"}, {"text", "it"}}}}}}},
      {"max_completion_tokens", 300},
      {"steps", 8},
      {"threshold", nullptr}};
  RouteFeatures f = route_features(body, true, 64);
  EXPECT_TRUE(f.chat);
  EXPECT_EQ(f.max_tokens, 300);
  EXPECT_TRUE(f.max_tokens_given);
  EXPECT_EQ(f.text, "Rewrite it") << "the last user message, its text parts joined";
  EXPECT_EQ(f.diffusion_fields, std::vector<std::string>{"steps"}) << "null reads as not given";
  EXPECT_FALSE(f.suffix);
}

TEST(RouteFeatures, ReadsCompletionBodiesAndToleratesBadTypes) {
  RouteFeatures f = route_features(json{{"prompt", {"def f():"}}, {"suffix", "\n  return 1"}}, false, 64);
  EXPECT_EQ(f.text, "def f():");
  EXPECT_TRUE(f.suffix);
  EXPECT_EQ(f.max_tokens, 64);
  EXPECT_FALSE(f.max_tokens_given);
  // Wrong types read as absent (the chosen model's validation names them).
  f = route_features(json{{"prompt", 5}, {"suffix", 3}, {"max_tokens", "many"}}, false, 64);
  EXPECT_EQ(f.text, "");
  EXPECT_FALSE(f.suffix);
  EXPECT_EQ(f.max_tokens, 64);
  EXPECT_FALSE(route_features(json{{"suffix", ""}}, false, 64).suffix) << "an empty suffix is no infill";
  EXPECT_FALSE(route_features(json{{"suffix", "x"}}, true, 64).suffix) << "chat has no suffix";
  EXPECT_EQ(route_features(json::array(), false, 64).max_tokens, 64);
}

TEST(Route, ShortChatGoesToTheAutoregressiveModel) {
  RouteDecision d = route_chat(chat("Name a colour.", {{"max_tokens", 32}}));
  EXPECT_EQ(d.model, 1u);
  EXPECT_EQ(d.reason, RouteReason::kShortGeneration);
  EXPECT_EQ(d.detail, "max_tokens 32 <= 256: short generation -> autoregressive (qwen)");
  // No max_tokens: the server default (64) is short.
  d = route_chat(chat("Name a colour."));
  EXPECT_EQ(d.model, 1u);
  EXPECT_EQ(d.detail, "max_tokens 64 (default) <= 256: short generation -> autoregressive (qwen)");
  // The threshold itself is still short.
  EXPECT_EQ(route_chat(chat("hi", {{"max_tokens", 256}})).model, 1u);
}

TEST(Route, LongGenerationGoesToTheDiffusionModel) {
  RouteDecision d = route_chat(chat("Write a story.", {{"max_tokens", 512}}));
  EXPECT_EQ(d.model, 0u);
  EXPECT_EQ(d.reason, RouteReason::kLongGeneration);
  EXPECT_EQ(d.detail, "max_tokens 512 > 256: long generation -> diffusion (demo)");
  RouterConfig c;
  c.short_max_tokens = 16;
  EXPECT_EQ(route_chat(chat("hi", {{"max_tokens", 17}}), kBoth, c).reason, RouteReason::kLongGeneration);
  EXPECT_EQ(route_chat(chat("hi", {{"max_completion_tokens", 16}}), kBoth, c).reason,
            RouteReason::kShortGeneration);
}

TEST(Route, KeywordsStartAWordCaseInsensitive) {
  RouteDecision d = route_chat(chat("Please REWRITE this function", {{"max_tokens", 16}}));
  EXPECT_EQ(d.model, 0u);
  EXPECT_EQ(d.reason, RouteReason::kKeyword);
  EXPECT_EQ(d.detail, "keyword 'rewrite' in the last user message -> diffusion (demo)");
  EXPECT_EQ(route_chat(chat("refactoring help")).reason, RouteReason::kKeyword)
      << "a keyword may start a longer word";
  EXPECT_EQ(route_chat(chat("fill in the blanks")).reason, RouteReason::kKeyword)
      << "keywords of several words";
  EXPECT_EQ(route_chat(chat("(rewrite) it")).reason, RouteReason::kKeyword);
  EXPECT_EQ(route_chat(chat("the prewrite hook")).reason, RouteReason::kShortGeneration) << "inside a word";
  // Only the last user message counts.
  json body = chat("rewrite it");
  body["messages"].push_back({{"role", "assistant"}, {"content", "done"}});
  body["messages"].push_back({{"role", "user"}, {"content", "thanks"}});
  EXPECT_EQ(route_chat(body).reason, RouteReason::kShortGeneration);
  // Configurable; none at all.
  RouterConfig c;
  c.keywords = split_keywords("translate, summarize");
  EXPECT_EQ(route_chat(chat("Translate this"), kBoth, c).reason, RouteReason::kKeyword);
  EXPECT_EQ(route_chat(chat("rewrite it"), kBoth, c).reason, RouteReason::kShortGeneration);
  c.keywords = split_keywords("");
  EXPECT_EQ(route_chat(chat("rewrite it"), kBoth, c).reason, RouteReason::kShortGeneration);
  // Completions: the prompt text.
  RouteDecision p = route(route_features(json{{"prompt", "Refactor: x = 1"}}, false, 16), kBoth, {});
  EXPECT_EQ(p.reason, RouteReason::kKeyword);
  EXPECT_EQ(p.detail, "keyword 'refactor' in the prompt -> diffusion (demo)");
}

TEST(Route, InfillAndDiffusionFieldsGoToTheDiffusionModel) {
  RouteDecision d = route(
      route_features(json{{"prompt", "def f("}, {"suffix", "):"}, {"max_tokens", 8}}, false, 64), kBoth, {});
  EXPECT_EQ(d.model, 0u);
  EXPECT_EQ(d.reason, RouteReason::kInfill);
  EXPECT_EQ(d.detail, "suffix given: infill -> diffusion (demo)");
  d = route_chat(chat("hi", {{"max_tokens", 8}, {"diffusing", true}}));
  EXPECT_EQ(d.model, 0u);
  EXPECT_EQ(d.reason, RouteReason::kDiffusionFields);
  EXPECT_EQ(d.detail, "'diffusing' is a diffusion-only field -> diffusion (demo)");
  for (const char* field :
       {"steps", "block_length", "threshold", "cfg_scale", "unmask", "remasking", "block_loop"})
    EXPECT_EQ(route_chat(chat("hi", {{field, 1}})).reason, RouteReason::kDiffusionFields) << field;
  // Sampling fields both kinds take are not diffusion-only.
  EXPECT_EQ(route_chat(chat("hi", {{"top_k", 5}, {"top_p", 0.9}, {"temperature", 0.5}, {"seed", 1}})).reason,
            RouteReason::kShortGeneration);
}

// A uniform-state canvas model (DiffusionGemma) beside a masked one: diffusion-only fields go to the first
// diffusion model that takes them all, infill to a masked one; the rest to the first diffusion model.
TEST(Route, FieldsGoToTheDiffusionModelThatTakesThem) {
  const std::vector<RouteTarget> three = {{"qwen", ModelKind::kAutoregressive},
                                          {"dgemma", ModelKind::kDiffusion, /*uniform_state=*/true},
                                          {"llada", ModelKind::kDiffusion}};
  RouteDecision d = route_chat(chat("hi", {{"max_tokens", 8}, {"t_min", 0.3}}), three);
  EXPECT_EQ(d.model, 1u);
  EXPECT_EQ(d.detail, "'t_min' is a diffusion-only field -> diffusion (dgemma)");
  EXPECT_EQ(route_chat(chat("hi", {{"max_denoising_steps", 8}, {"diffusing", true}}), three).model, 1u);
  EXPECT_EQ(route_chat(chat("hi", {{"diffusing", true}}), three).model, 1u) << "both take it: the first";
  EXPECT_EQ(route_chat(chat("hi", {{"steps", 8}, {"diffusing", true}}), three).model, 2u);
  d = route_chat(chat("hi", {{"steps", 8}}), three);
  EXPECT_EQ(d.model, 2u);
  EXPECT_EQ(d.detail, "'steps' is a diffusion-only field -> diffusion (llada)");
  d = route(route_features(json{{"prompt", "def f("}, {"suffix", "):"}}, false, 64), three, {});
  EXPECT_EQ(d.model, 2u);
  EXPECT_EQ(d.detail, "suffix given: infill -> diffusion (llada)");
  EXPECT_EQ(route_chat(chat("hi", {{"max_tokens", 512}}), three).model, 1u) << "long: the first diffusion";
  // None takes them all: the first diffusion model, whose validation names the field.
  EXPECT_EQ(route_chat(chat("hi", {{"steps", 8}, {"t_min", 0.3}}), three).model, 1u);
  const std::vector<RouteTarget> only_uniform = {{"qwen", ModelKind::kAutoregressive},
                                                 {"dgemma", ModelKind::kDiffusion, true}};
  EXPECT_EQ(route_chat(chat("hi", {{"steps", 8}}), only_uniform).model, 1u);
}

TEST(Route, RulesApplyInOrder) {
  // infill before diffusion fields before keywords before length.
  json body = {{"prompt", "rewrite"}, {"suffix", "x"}, {"steps", 4}, {"max_tokens", 999}};
  EXPECT_EQ(route(route_features(body, false, 64), kBoth, {}).reason, RouteReason::kInfill);
  body.erase("suffix");
  EXPECT_EQ(route(route_features(body, false, 64), kBoth, {}).reason, RouteReason::kDiffusionFields);
  body.erase("steps");
  EXPECT_EQ(route(route_features(body, false, 64), kBoth, {}).reason, RouteReason::kKeyword);
  body["prompt"] = "hello";
  EXPECT_EQ(route(route_features(body, false, 64), kBoth, {}).reason, RouteReason::kLongGeneration);
}

TEST(Route, OneKindLoadedTakesEverything) {
  const std::vector<RouteTarget> dllms = {{"a", ModelKind::kDiffusion}, {"b", ModelKind::kDiffusion}};
  RouteDecision d = route_chat(chat("hi", {{"max_tokens", 8}}), dllms);
  EXPECT_EQ(d.model, 0u);
  EXPECT_EQ(d.reason, RouteReason::kOnlyKind);
  EXPECT_EQ(d.detail, "only diffusion models are served -> a");
  const std::vector<RouteTarget> ars = {{"q", ModelKind::kAutoregressive}};
  // Even a request only a diffusion model could serve: the model's own validation answers it (400 naming
  // the field).
  d = route(route_features(json{{"prompt", "x"}, {"suffix", "y"}}, false, 64), ars, {});
  EXPECT_EQ(d.model, 0u);
  EXPECT_EQ(d.reason, RouteReason::kOnlyKind);
  EXPECT_EQ(d.detail, "only autoregressive models are served -> q");
}

TEST(Route, TheFirstModelOfTheKindInOrder) {
  const std::vector<RouteTarget> three = {{"ar1", ModelKind::kAutoregressive},
                                          {"d1", ModelKind::kDiffusion},
                                          {"ar2", ModelKind::kAutoregressive},
                                          {"d2", ModelKind::kDiffusion}};
  EXPECT_EQ(route_chat(chat("hi"), three).model, 0u);
  EXPECT_EQ(route_chat(chat("rewrite"), three).model, 1u);
}

TEST(Route, JsonAndNames) {
  RouteDecision d = route_chat(chat("hi", {{"max_tokens", 512}}));
  json j = route_json(d, kBoth);
  EXPECT_EQ(j["model"], "demo");
  EXPECT_EQ(j["kind"], "diffusion");
  EXPECT_EQ(j["reason"], "long_generation");
  EXPECT_EQ(j["detail"], d.detail);
  std::vector<std::string> names;
  for (RouteReason r : all_route_reasons()) names.push_back(reason_name(r));
  EXPECT_EQ(names,
            (std::vector<std::string>{"requested", "default", "only_kind", "infill", "diffusion_fields",
                                      "keyword", "long_generation", "short_generation"}));
  EXPECT_STREQ(kind_name(ModelKind::kAutoregressive), "autoregressive");
  EXPECT_EQ(split_keywords(" rewrite , fill in,,refactor "),
            (std::vector<std::string>{"rewrite", "fill in", "refactor"}));
  EXPECT_TRUE(split_keywords("").empty());
  EXPECT_TRUE(split_keywords(" , ").empty());
}

}  // namespace
}  // namespace dllm::server
