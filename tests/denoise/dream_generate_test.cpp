// Every deterministic case of the official Dream diffusion_generate()
// (tests/data/oracle/golden/dream_tiny_gqa_f32/diffusion_generate.json) reproduced token for token and step
// by step, plus the seeded cases' structure and Dream's padding semantics.
#include <gtest/gtest.h>

#include "denoise/schedule.h"
#include "dllm/dllm.h"
#include "golden_cases.h"
#include "test_util.h"

namespace dllm {
namespace {

std::shared_ptr<Model> dream() {
  static std::shared_ptr<Model> model = [] {
    LoadOptions o;
    o.precision = Precision::kF32;
    o.backend = test::backend();
    return Model::load(test::data_path("oracle/models/dream_tiny_gqa_f32"), o).value();
  }();
  return model;
}

std::vector<nlohmann::json> cases(bool deterministic) {
  std::vector<nlohmann::json> out;
  for (auto& c :
       test::read_cases(test::data_path("oracle/golden/dream_tiny_gqa_f32/diffusion_generate.json")))
    if (c["deterministic"].get<bool>() == deterministic) out.push_back(c);
  return out;
}

std::string case_name(const ::testing::TestParamInfo<nlohmann::json>& info) {
  std::string name = info.param["id"].get<std::string>();
  for (char& ch : name)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

class DreamGolden : public ::testing::TestWithParam<nlohmann::json> {};

TEST_P(DreamGolden, ReproducesTokensAndTrajectory) {
  const auto& c = GetParam();
  const auto prompts = test::prompts_of(c);
  const int64_t prompt_len = static_cast<int64_t>(prompts[0].size());
  std::vector<std::vector<std::pair<int64_t, int32_t>>> steps;
  std::vector<int64_t> committed_per_step;
  auto r = generate(*dream(), prompts, test::dream_params_of(c["kwargs"]), [&](const StepEvent& ev) {
    std::vector<std::pair<int64_t, int32_t>> changed;
    for (int64_t pos : (*ev.committed)[0])
      if ((*ev.canvas)[0][pos] != dream()->info().mask_id)
        changed.emplace_back(pos + prompt_len, (*ev.canvas)[0][pos]);
    committed_per_step.push_back(static_cast<int64_t>((*ev.committed)[0].size()));
    steps.push_back(changed);
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->outputs, c["generated"].get<std::vector<std::vector<int32_t>>>());
  EXPECT_EQ(r->forwards, c["num_model_calls"].get<int64_t>());
  EXPECT_EQ(committed_per_step, c["number_transfer_tokens"].get<std::vector<int64_t>>());
  const auto& traj = c["trajectory"];
  ASSERT_EQ(steps.size(), traj.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    std::vector<std::pair<int64_t, int32_t>> want;
    for (const auto& e : traj[s]) want.emplace_back(e[1].get<int64_t>(), e[2].get<int32_t>());
    auto got = steps[s];
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "step " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Dream, DreamGolden, ::testing::ValuesIn(cases(true)), case_name);

// The tests over cases(true) and cases(false) must have cases to run.
TEST(DreamGenerate, GoldenFileHasDeterministicAndSeededCases) {
  EXPECT_GE(cases(true).size(), 5u);
  EXPECT_GE(cases(false).size(), 1u);
}

TEST(DreamGenerate, TimestepsAreTorchLinspaceInFloat32) {
  for (const auto& c : cases(true)) {
    const auto want = c["timesteps_f32"].get<std::vector<float>>();
    const auto got = dream_timesteps(c["kwargs"]["steps"].get<int64_t>(), 1e-3);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << c["id"] << " t[" << i << "]";
  }
}

TEST(DreamGenerate, TimestepCountsTruncateAsTheReference) {
  // Oracle README §9.4: with steps == n the first step commits 0 and the last 2.
  for (auto [steps, want] : std::vector<std::pair<int64_t, std::vector<int64_t>>>{
           {8, {3, 4, 4, 4, 4, 4, 4, 5}}, {32, {0}}, {16, {1, 2}}}) {
    const auto t = dream_timesteps(steps, 1e-3);
    int64_t masked = 32;
    std::vector<int64_t> got;
    for (int64_t i = 0; i < steps && got.size() < want.size(); ++i) {
      got.push_back(timestep_transfer_count(static_cast<float>(masked), t[i], t[i + 1], i == steps - 1));
      masked -= got.back();
    }
    EXPECT_EQ(got, want) << steps << " steps";
  }
}

// Seeded cases use torch's RNG stream, which no C++ engine reproduces: check their structure instead.
TEST(DreamGenerate, SeededCasesFillEveryPositionInTheReferenceStepCount) {
  for (const auto& c : cases(false)) {
    auto p = test::dream_params_of(c["kwargs"]);
    p.seed = 7;
    auto a = generate(*dream(), test::prompts_of(c), p).value();
    auto b = generate(*dream(), test::prompts_of(c), p).value();
    EXPECT_EQ(a.outputs, b.outputs) << c["id"];
    EXPECT_EQ(a.forwards, c["num_model_calls"].get<int64_t>()) << c["id"];
    ASSERT_EQ(a.outputs[0].size(), c["generated"][0].size());
    for (int32_t t : a.outputs[0]) EXPECT_NE(t, dream()->info().mask_id) << c["id"];
  }
}

TEST(DreamGenerate, TopKDefaultIsTheLeakedFifty) {
  // top_k = -1 (default) must equal an explicit 50, and differ from top_k = 0 (none) on some golden case.
  const auto all = cases(true);
  auto p = test::dream_params_of(all[0]["kwargs"]);
  p.top_k = -1;
  auto def = generate(*dream(), test::prompts_of(all[0]), p).value();
  p.top_k = 50;
  auto fifty = generate(*dream(), test::prompts_of(all[0]), p).value();
  EXPECT_EQ(def.outputs, fifty.outputs);
}

TEST(DreamGenerate, LeftPaddedBatchRowsEqualTheirUnpaddedRuns) {
  const std::vector<int32_t> p0 = {153, 507, 68, 274, 455, 250, 396, 303};
  const std::vector<int32_t> p1 = {95, 177, 218, 227, 130, 417, 121, 351, 61, 153, 163, 225, 152};
  GenerateParams p;
  p.gen_length = 32;
  p.steps = 16;
  p.unmask = Unmask::kMargin;
  auto a = generate(*dream(), {p0}, p).value();
  auto b = generate(*dream(), {p1}, p).value();
  auto both = generate(*dream(), {p0, p1}, p).value();
  // The rows share k (batch-mean mask count) and the same number of masks each step, so each equals its own
  // run.
  EXPECT_EQ(both.outputs[0], a.outputs[0]);
  EXPECT_EQ(both.outputs[1], b.outputs[0]);
}

TEST(DreamGenerate, RejectsBadSettingsNamingTheValue) {
  GenerateParams p;
  p.gen_length = 16;
  p.top_p = 1.5;
  auto r = generate(*dream(), {{1, 2}}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("top_p must be in (0, 1], got 1.5"), std::string::npos) << r.error();
  p.top_p = 1;
  p.eps = 0;
  r = generate(*dream(), {{1, 2}}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("eps"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace dllm
