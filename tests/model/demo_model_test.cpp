// The demo model shipped in models/demo: it loads with no special case, its tokenizer encodes the recorded
// prompts to the recorded ids, and exact-mode generation reproduces the PyTorch recipe's recorded outputs.
#include <gtest/gtest.h>

#include "dllm/dllm.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace dllm {
namespace {

const std::string kDemo = std::string(DLLM_SOURCE_DIR) + "/models/demo";

TEST(DemoModel, ReproducesRecordedGenerations) {
  LoadOptions o;
  o.precision = Precision::kF32;
  auto model = Model::load(kDemo, o);
  ASSERT_TRUE(model.ok()) << model.error();
  const Tokenizer tok = Tokenizer::load(kDemo);
  const auto recorded = test::read_json(kDemo + "/reference_generation.json");
  ASSERT_FALSE(recorded["cases"].empty());
  for (const auto& c : recorded["cases"]) {
    const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(c["prompt_text"].get<std::string>(), false), ids) << c["file"];
    GenerateParams p;
    p.gen_length = c["kwargs"]["gen_length"];
    p.block_length = c["kwargs"]["block_length"];
    p.steps = c["kwargs"]["steps"];
    auto first = generate(**model, {ids}, p);
    ASSERT_TRUE(first.ok()) << first.error();
    EXPECT_EQ(first->outputs[0], c["generated_ids"].get<std::vector<int32_t>>()) << c["file"];
    auto again = generate(**model, {ids}, p);
    EXPECT_EQ(again->outputs, first->outputs) << "not deterministic: " << c["file"];
  }
}

}  // namespace
}  // namespace dllm
