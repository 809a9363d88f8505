// The llama_cli schedule (Transfer::kLlamaCli, llama.cpp's llama-diffusion-cli) on its own: the timestep
// count in f32, the block layout over prompt + generation (short and empty trailing blocks, each step a
// forward, also one that finds its block empty), the leftmost-first default order, and the settings it
// refuses. The goldens from llama.cpp itself are tests/denoise/llada_moe_generate_test.cpp.
#include <gtest/gtest.h>

#include <numeric>

#include "denoise/schedule.h"
#include "dllm/dllm.h"
#include "scripted_model.h"
#include "test_util.h"

namespace dllm {
namespace {

const ModelInfo& llada_info() {
  static const auto model = [] {
    LoadOptions o;
    o.precision = Precision::kF32;
    o.backend = test::backend();
    return Model::load(test::data_path("oracle/models/llada_tiny_f32"), o).value();
  }();
  return model->info();
}

TEST(LlamaCliSchedule, TimestepCountsTruncateAndTakeTheRestLast) {
  // t = 1, s = 1 - 1/16 * 0.999: int(54 * 0.0624375) = 3.
  EXPECT_EQ(llama_cli_timestep_count(0, 16, 54, 0.001f), 3);
  EXPECT_EQ(llama_cli_timestep_count(15, 16, 7, 0.001f), 7);  // the last step commits every mask
  EXPECT_EQ(llama_cli_timestep_count(0, 64, 10, 0.001f), 0);  // int(10 * 0.0156...) = 0: a step with none
  // Over a whole run every mask is committed, a count never exceeding what is masked.
  for (int64_t steps : {1, 8, 16, 64}) {
    int64_t masked = 54;
    for (int64_t step = 0; step < steps; ++step) {
      const int64_t k = llama_cli_timestep_count(step, steps, masked, 0.01f);
      ASSERT_GE(k, 0);
      ASSERT_LE(k, masked);
      masked -= k;
    }
    EXPECT_EQ(masked, 0) << steps;
  }
}

struct Commits {
  std::vector<std::vector<int64_t>> steps;  // generated positions committed per step (forward)
  GenerateResult result;
};

// A scripted model after a prompt of `prompt_len` plain tokens: the llama_cli schedule with `block_length`.
Commits run(int64_t prompt_len, int64_t gen_length, int64_t block_length, int64_t steps) {
  const ModelInfo& info = llada_info();
  const int32_t plain = test::ScriptedModel::plain_token(info);
  test::ScriptedModel model(info, prompt_len, [&](int64_t) { return plain; });
  GenerateParams p;
  p.transfer = Transfer::kLlamaCli;
  p.gen_length = gen_length;
  p.block_length = block_length;
  p.steps = steps;
  Commits c;
  auto r = generate(model, {std::vector<int32_t>(static_cast<size_t>(prompt_len), plain)}, p,
                    [&](const StepEvent& ev) {
                      c.steps.push_back((*ev.committed)[0]);
                      return true;
                    });
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error());
  if (r.ok()) c.result = r.value();
  EXPECT_EQ(c.result.forwards, model.forwards());
  return c;
}

TEST(LlamaCliSchedule, BlocksCountThePromptAndStartAtItsEnd) {
  // Canvas 32 = prompt 10 + 22, blocks of 8: 4 blocks of 8 steps (32 / 4), at [10,18) [18,26) [26,32) and an
  // empty [34,32): 8 + 8 + (6 commits + the forward that finds the block empty) + 1 forwards.
  const Commits c = run(10, 22, 8, 32);
  EXPECT_EQ(c.result.forwards, 24);
  ASSERT_EQ(c.steps.size(), 24u);
  std::vector<int64_t> order;
  for (const auto& s : c.steps) {
    EXPECT_LE(s.size(), 1u);
    order.insert(order.end(), s.begin(), s.end());
  }
  std::vector<int64_t> left_to_right(22);
  std::iota(left_to_right.begin(), left_to_right.end(), 0);
  EXPECT_EQ(order, left_to_right);
  EXPECT_TRUE(c.steps[22].empty());  // block 2 found empty after its 6 commits
  EXPECT_TRUE(c.steps[23].empty());  // the empty trailing block
  for (int32_t t : c.result.outputs[0]) EXPECT_NE(t, llada_info().mask_id);
}

TEST(LlamaCliSchedule, TransferCountsPerBlockPutTheRemainderFirst) {
  // Canvas 16 = prompt 3 + 13, one block of 16 (its generated part: 13 masks), 4 steps: 4, 3, 3, 3.
  const Commits c = run(3, 13, 16, 4);
  ASSERT_EQ(c.steps.size(), 4u);
  EXPECT_EQ(c.steps[0], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(c.steps[3], (std::vector<int64_t>{10, 11, 12}));
  // Steps 0 = the canvas length: one position per step in a whole block, then the empty-block forward.
  const Commits d = run(3, 13, 8, 0);  // blocks [3,11) [11,16), 8 steps each
  EXPECT_EQ(d.result.forwards, 8 + 5 + 1);
}

TEST(LlamaCliSchedule, TimestepScheduleWithoutBlockLength) {
  const Commits c = run(10, 54, 0, 16);
  EXPECT_EQ(c.result.forwards, 16);
  EXPECT_EQ(c.steps[0], (std::vector<int64_t>{0, 1, 2}));  // int(54 * (1 - s/t)) = 3, leftmost first
}

TEST(LlamaCliSchedule, RefusesWhatLlamaDiffusionCliCannotLayOut) {
  const ModelInfo& info = llada_info();
  const int32_t plain = test::ScriptedModel::plain_token(info);
  test::ScriptedModel model(info, 3, [&](int64_t) { return plain; });
  const std::vector<std::vector<int32_t>> prompt = {{plain, plain, plain}};
  GenerateParams p;
  p.transfer = Transfer::kLlamaCli;
  p.gen_length = 14;  // canvas 17
  p.block_length = 8;
  auto expect_error = [&](const GenerateParams& q, const std::string& part) {
    auto r = generate(model, prompt, q);
    ASSERT_FALSE(r.ok()) << part;
    EXPECT_NE(r.error().find(part), std::string::npos) << r.error();
  };
  expect_error(p, "multiple of block_length 8");
  p.gen_length = 13;  // canvas 16: 2 blocks
  p.steps = 3;
  expect_error(p, "steps 3 is not a multiple of the number of blocks 2");
  p.steps = 4;
  EXPECT_TRUE(generate(model, prompt, p).ok());
  p.cache = CacheMode::kDual;
  expect_error(p, "cache must be none");
  p.cache = CacheMode::kDefault;
  p.alg_temp = 0.5;
  expect_error(p, "unmask 'sequential'");
  p.alg_temp = 0;
  std::vector<int32_t> canvas(16, plain);
  canvas[5] = info.mask_id;
  auto r = infill(model, {canvas}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("llama_cli"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace dllm
