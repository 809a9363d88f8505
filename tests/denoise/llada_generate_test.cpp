// Every deterministic case of the official LLaDA generate()
// (tests/data/oracle/golden/llada_tiny_f32/generate.json) reproduced token for token.
#include <gtest/gtest.h>

#include "dllm/dllm.h"
#include "golden_cases.h"
#include "scripted_model.h"
#include "test_util.h"

namespace dllm {
namespace {

std::shared_ptr<Model> tiny() {
  static std::shared_ptr<Model> model = [] {
    LoadOptions o;
    o.precision = Precision::kF32;
    o.backend = test::backend();
    return Model::load(test::data_path("oracle/models/llada_tiny_f32"), o).value();
  }();
  return model;
}

class GoldenCase : public ::testing::TestWithParam<nlohmann::json> {};

TEST_P(GoldenCase, ReproducesTokenForToken) {
  const auto& c = GetParam();
  const auto result = generate(*tiny(), test::prompts_of(c), test::llada_params_of(c["kwargs"]));
  ASSERT_TRUE(result.ok()) << result.error();
  const auto expected = c["generated"].get<std::vector<std::vector<int32_t>>>();
  auto got = result;
  EXPECT_EQ(got->outputs, expected);
  EXPECT_EQ(got->forwards, c["num_model_calls"].get<int64_t>());
}

std::vector<nlohmann::json> deterministic_cases() {
  std::vector<nlohmann::json> out;
  for (auto& c : test::read_cases(test::data_path("oracle/golden/llada_tiny_f32/generate.json")))
    if (c["deterministic"].get<bool>()) out.push_back(c);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Llada, GoldenCase, ::testing::ValuesIn(deterministic_cases()),
                         [](const ::testing::TestParamInfo<nlohmann::json>& info) {
                           std::string name = info.param["id"].get<std::string>();
                           for (char& ch : name)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// The golden tests above are one per deterministic case: there must be some.
TEST(LladaGenerate, GoldenFileHasDeterministicCases) {
  EXPECT_GE(deterministic_cases().size(), 10u);
}

TEST(LladaGenerate, TrajectoryMatchesStepByStep) {
  // The per-step commits (not only the final tokens) follow the reference.
  int checked = 0;
  for (const auto& c : deterministic_cases()) {
    if (c["prompt"].size() != 1 || c["kwargs"]["cfg_scale"].get<double>() > 0) continue;
    ++checked;
    std::vector<std::vector<std::pair<int64_t, int32_t>>> steps;
    const int64_t prompt_len = c["prompt"][0].size();
    auto r =
        generate(*tiny(), test::prompts_of(c), test::llada_params_of(c["kwargs"]), [&](const StepEvent& ev) {
          std::vector<std::pair<int64_t, int32_t>> changed;
          for (int64_t pos : (*ev.committed)[0]) changed.emplace_back(pos + prompt_len, (*ev.canvas)[0][pos]);
          steps.push_back(changed);
          return true;
        });
    ASSERT_TRUE(r.ok());
    const auto& traj = c["trajectory"];
    ASSERT_EQ(steps.size(), traj.size()) << c["id"];
    for (size_t s = 0; s < steps.size(); ++s) {
      // The reference lists positions whose token changed; a committed mask id changes nothing.
      std::vector<std::pair<int64_t, int32_t>> want, got;
      for (const auto& e : traj[s]) want.emplace_back(e[1].get<int64_t>(), e[2].get<int32_t>());
      for (const auto& e : steps[s])
        if (e.second != tiny()->info().mask_id) got.push_back(e);
      std::sort(want.begin(), want.end());
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, want) << c["id"] << " step " << s;
    }
  }
  EXPECT_GE(checked, 5);
}

TEST(LladaGenerate, RejectsBadSettingsWithTheValue) {
  GenerateParams p;
  p.gen_length = 30;
  p.block_length = 8;
  auto r = generate(*tiny(), {{480, 1, 2}}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("block_length 8"), std::string::npos) << r.error();
  p.block_length = 10;
  p.steps = 4;
  r = generate(*tiny(), {{480, 1, 2}}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("steps 4"), std::string::npos) << r.error();
  r = generate(*tiny(), {{480, 1, 700}}, GenerateParams{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("700"), std::string::npos) << r.error();
}

// A scripted model (LLaDA's ids) whose only EOS is at generated position 8, the first of the second block:
// the exact run commits it and goes on; with stop_at_eos the row stops there, EOS fills the rest, and the 23
// steps after it are not run.
TEST(LladaGenerate, StopAtEosFillsTheRestAndSavesForwards) {
  const ModelInfo& info = tiny()->info();
  const int32_t eos = info.eos_id, plain = test::ScriptedModel::plain_token(info);
  ASSERT_GE(eos, 0);
  const std::vector<int32_t> prompt = {480, 158, 483};
  test::ScriptedModel model(info, static_cast<int64_t>(prompt.size()),
                            [&](int64_t g) { return g == 8 ? eos : plain; });
  GenerateParams p;
  p.gen_length = 32;
  p.block_length = 8;
  p.steps = 32;
  auto exact = generate(model, {prompt}, p).value();
  std::vector<int32_t> want(32, plain);
  want[8] = eos;
  ASSERT_EQ(exact.outputs[0], want);  // EOS is committed, and the exact run goes on after it
  EXPECT_EQ(exact.forwards, 32);
  p.stop_at_eos = true;
  auto stopped = generate(model, {prompt}, p).value();
  std::fill(want.begin() + 8, want.end(), eos);
  EXPECT_EQ(stopped.outputs[0], want);
  EXPECT_EQ(stopped.forwards, 9);  // the first block (8 steps) and the step that committed EOS
}

TEST(LladaGenerate, SeededSamplingIsReproducible) {
  GenerateParams p;
  p.gen_length = 16;
  p.steps = 8;
  p.temperature = 0.8;
  p.seed = 42;
  auto a = generate(*tiny(), {{480, 158}}, p).value();
  auto b = generate(*tiny(), {{480, 158}}, p).value();
  EXPECT_EQ(a.outputs, b.outputs);
  p.remasking = Remasking::kRandom;
  auto c = generate(*tiny(), {{480, 158}}, p).value();
  auto d = generate(*tiny(), {{480, 158}}, p).value();
  EXPECT_EQ(c.outputs, d.outputs);
}

}  // namespace
}  // namespace dllm
