// Every deterministic case of the official LLaDA generate()
// (tests/data/oracle/golden/llada_tiny_f32/generate.json) reproduced token for token.
#include <gtest/gtest.h>

#include "dllm/dllm.h"
#include "golden_cases.h"
#include "test_util.h"

namespace dllm {
namespace {

std::shared_ptr<Model> tiny() {
  static std::shared_ptr<Model> model = [] {
    LoadOptions o;
    o.precision = Precision::kF32;
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

TEST(LladaGenerate, TrajectoryMatchesStepByStep) {
  // The per-step commits (not only the final tokens) follow the reference.
  for (const auto& c : deterministic_cases()) {
    if (c["prompt"].size() != 1 || c["kwargs"]["cfg_scale"].get<double>() > 0) continue;
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

TEST(LladaGenerate, StopAtEosFillsTheRestAndSavesForwards) {
  GenerateParams p;
  p.gen_length = 32;
  p.block_length = 8;
  p.steps = 32;
  auto exact = generate(*tiny(), {{480, 158, 483}}, p).value();
  p.stop_at_eos = true;
  auto stopped = generate(*tiny(), {{480, 158, 483}}, p).value();
  const int32_t eos = tiny()->info().eos_id;
  // Up to the first EOS (if any), the two agree; after it, everything is EOS.
  auto first = std::find(stopped.outputs[0].begin(), stopped.outputs[0].end(), eos);
  for (auto it = first; it != stopped.outputs[0].end(); ++it) EXPECT_EQ(*it, eos);
  EXPECT_LE(stopped.forwards, exact.forwards);
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
