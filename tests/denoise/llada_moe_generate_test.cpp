// LLaDA-MoE generation against llama.cpp (tests/data/oracle/ar/golden/llada_moe_tiny, oracle/ar README §5),
// from the Hugging Face directory and from llama.cpp's GGUF file:
// * llada_generate.json: the official LLaDA generate() low_confidence loop, which is the family's default
//   (GenerateParams as for LLaDA, nothing LLaDA-MoE specific), token for token with the same model calls;
// * diffusion_cli.json: llama-diffusion-cli's schedules (`--schedule llama_cli`, Transfer::kLlamaCli): the
//   canvas, its trajectory and the number of model calls, empty trailing blocks included.
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>

#include "dllm/dllm.h"
#include "test_util.h"

namespace dllm {
namespace {

const char* const kSources[] = {"oracle/ar/models/llada_moe_tiny", "oracle/ar/gguf/llada_moe_tiny_f32.gguf"};

Model& model(int source) {
  static std::shared_ptr<Model> models[2];
  if (!models[source]) {
    LoadOptions o;
    o.precision = Precision::kF32;
    o.backend = test::backend();
    models[source] = Model::load(test::data_path(kSources[source]), o).value();
  }
  return *models[source];
}

std::vector<nlohmann::json> cases(const std::string& file) {
  return test::read_cases(test::data_path("oracle/ar/golden/llada_moe_tiny/" + file));
}

// The commits of each step that committed something, as (canvas position, token).
using Trajectory = std::vector<std::vector<std::pair<int64_t, int32_t>>>;

struct Generated {
  GenerateResult result;
  Trajectory trajectory;
};

Generated run(int source, const std::vector<int32_t>& prompt, const GenerateParams& p) {
  Generated r;
  const auto P = static_cast<int64_t>(prompt.size());
  auto result = generate(model(source), {prompt}, p, [&](const StepEvent& ev) {
    std::vector<std::pair<int64_t, int32_t>> step;
    for (int64_t pos : (*ev.committed)[0]) step.emplace_back(pos + P, (*ev.canvas)[0][pos]);
    if (!step.empty()) r.trajectory.push_back(step);
    return true;
  });
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error());
  if (result.ok()) r.result = std::move(result.value());
  return r;
}

// The golden trajectory ([pos, id] lists per step, steps that committed nothing left out), each step sorted.
Trajectory golden_trajectory(const nlohmann::json& steps) {
  Trajectory t;
  for (const auto& s : steps) {
    std::vector<std::pair<int64_t, int32_t>> step;
    for (const auto& e : s) step.emplace_back(e[0].get<int64_t>(), e[1].get<int32_t>());
    if (step.empty()) continue;
    std::sort(step.begin(), step.end());
    t.push_back(step);
  }
  return t;
}

Trajectory sorted(Trajectory t) {
  for (auto& s : t) std::sort(s.begin(), s.end());
  return t;
}

std::string case_name(const nlohmann::json& c, int source) {
  std::string name = c["id"].get<std::string>() + (source == 0 ? "_hf" : "_gguf");
  for (char& ch : name)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

struct Case {
  nlohmann::json c;  // the golden case
  int source;        // index into kSources
  // Failures name the case, not its whole JSON.
  friend void PrintTo(const Case& k, std::ostream* os) { *os << case_name(k.c, k.source); }
};

std::vector<Case> with_sources(const std::vector<nlohmann::json>& cs) {
  std::vector<Case> out;
  for (int source : {0, 1})
    for (const auto& c : cs) out.push_back({c, source});
  return out;
}

std::string param_name(const ::testing::TestParamInfo<Case>& info) {
  return case_name(info.param.c, info.param.source);
}

// ---- the official LLaDA generate() loop

class LladaLoop : public ::testing::TestWithParam<Case> {};

TEST_P(LladaLoop, ReproducesTokenForToken) {
  const auto& [c, source] = GetParam();
  const auto& kw = c["kwargs"];
  ASSERT_EQ(kw["remasking"], "low_confidence");
  ASSERT_EQ(kw["mask_id"].get<int32_t>(), model(source).info().mask_id);
  GenerateParams p;  // LLaDA's generate() semantics are the family default: only its keyword arguments here
  p.steps = kw["steps"];
  p.gen_length = kw["gen_length"];
  p.block_length = kw["block_length"];
  p.temperature = kw["temperature"];
  p.cfg_scale = kw["cfg_scale"];
  const Generated r = run(source, c["prompt"].get<std::vector<int32_t>>(), p);
  ASSERT_EQ(r.result.outputs.size(), 1u);
  EXPECT_EQ(r.result.outputs[0], c["generated"].get<std::vector<int32_t>>());
  EXPECT_EQ(r.result.forwards, c["num_model_calls"].get<int64_t>());
  EXPECT_EQ(sorted(r.trajectory), golden_trajectory(c["trajectory"]));
}

INSTANTIATE_TEST_SUITE_P(LladaMoe, LladaLoop, ::testing::ValuesIn(with_sources(cases("llada_generate.json"))),
                         param_name);

TEST(LladaMoeGenerate, LladaLoopGoldenHasTheGrid) {
  EXPECT_EQ(cases("llada_generate.json").size(), 18u);  // g{32,64} x b{8,16,32} x s{g,g/2,g/4}
}

// Infilling runs on the same loop: a prompt-then-masks canvas gives generate()'s tokens.
TEST(LladaMoeGenerate, InfillOfPromptThenMasksIsGenerate) {
  const auto c = cases("llada_generate.json").front();
  const auto prompt = c["prompt"].get<std::vector<int32_t>>();
  GenerateParams p;
  p.steps = c["kwargs"]["steps"];
  p.gen_length = c["kwargs"]["gen_length"];
  p.block_length = c["kwargs"]["block_length"];
  std::vector<int32_t> canvas = prompt;
  canvas.resize(prompt.size() + static_cast<size_t>(p.gen_length), model(0).info().mask_id);
  const auto filled = infill(model(0), {canvas}, p).value();
  std::vector<int32_t> want = prompt;
  const auto generated = c["generated"].get<std::vector<int32_t>>();
  want.insert(want.end(), generated.begin(), generated.end());
  EXPECT_EQ(filled.outputs[0], want);
}

// ---- llama-diffusion-cli

// The llama-diffusion-cli arguments of a case as GenerateParams: its canvas (-ub) is prompt + gen_length;
// --diffusion-block-length B or --diffusion-eps E; --top-k 1 makes every confidence 1 (leftmost first, the
// llama_cli schedule's default order) and the token the argmax.
GenerateParams llama_cli_params(const nlohmann::json& c) {
  GenerateParams p;
  p.transfer = Transfer::kLlamaCli;
  p.gen_length = c["ub"].get<int64_t>() - static_cast<int64_t>(c["prompt"].size());
  p.steps = c["steps"];
  p.block_length = c["block_length"];
  if (c["eps"].get<double>() > 0) p.eps = c["eps"];
  return p;
}

class LlamaCli : public ::testing::TestWithParam<Case> {};

TEST_P(LlamaCli, ReproducesCanvasAndModelCalls) {
  const auto& [c, source] = GetParam();
  ASSERT_EQ(c["prompt_ids_seen_by_cli"], c["prompt"]);
  const auto prompt = c["prompt"].get<std::vector<int32_t>>();
  const Generated r = run(source, prompt, llama_cli_params(c));
  ASSERT_EQ(r.result.outputs.size(), 1u);
  EXPECT_EQ(r.result.outputs[0], c["output"].get<std::vector<int32_t>>());
  EXPECT_EQ(static_cast<int64_t>(r.result.outputs[0].size()), c["n_generated"].get<int64_t>());
  if (c.contains("num_model_calls")) {
    EXPECT_EQ(r.result.forwards, c["num_model_calls"].get<int64_t>());
  }
  EXPECT_EQ(sorted(r.trajectory), golden_trajectory(c["trajectory"]));
}

INSTANTIATE_TEST_SUITE_P(LladaMoe, LlamaCli, ::testing::ValuesIn(with_sources(cases("diffusion_cli.json"))),
                         param_name);

TEST(LladaMoeGenerate, LlamaCliGoldenHasBothSchedules) {
  int blocks = 0, timestep = 0;
  for (const auto& c : cases("diffusion_cli.json"))
    (c["block_length"].get<int64_t>() > 0 ? blocks : timestep)++;
  EXPECT_GE(blocks, 8);
  EXPECT_GE(timestep, 3);
}

// With --top-k 1 all of llama-diffusion-cli's algorithms agree (README §5.6): so does the sequential order
// given explicitly, and the llama_cli schedule's default is that order.
TEST(LladaMoeGenerate, LlamaCliDefaultOrderIsSequential) {
  const auto c = cases("diffusion_cli.json").front();
  GenerateParams p = llama_cli_params(c);
  const auto prompt = c["prompt"].get<std::vector<int32_t>>();
  const auto by_default = run(0, prompt, p).result.outputs;
  p.unmask = Unmask::kSequential;
  EXPECT_EQ(run(0, prompt, p).result.outputs, by_default);
  p.unmask = Unmask::kConfidence;  // the full-softmax confidence is another order on this model
  EXPECT_NE(run(0, prompt, p).result.outputs, by_default);
}

}  // namespace
}  // namespace dllm
