// LLaDA-MoE (llada-moe): the tiny model's raw bidirectional logits against llama.cpp's
// (tests/data/oracle/ar/golden/llada_moe_tiny/forward.json, oracle/ar README §3 and §5), from the Hugging
// Face directory and from llama.cpp's own GGUF file, which must give the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "dllm/dllm.h"
#include "test_util.h"

namespace dllm {
namespace {

const char* const kSources[] = {"oracle/ar/models/llada_moe_tiny", "oracle/ar/gguf/llada_moe_tiny_f32.gguf"};

std::shared_ptr<Model> load(const std::string& rel) {
  LoadOptions o;
  o.precision = Precision::kF32;
  o.backend = test::backend();
  auto m = Model::load(test::data_path(rel), o);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error());
  return m.ok() ? m.value() : nullptr;
}

std::vector<float> logits(Model& m, const std::vector<int32_t>& ids) {
  ForwardInput in;
  in.tokens = ids;
  return m.forward(in).value();
}

nlohmann::json sequences() {
  return test::read_json(test::data_path("oracle/ar/golden/llada_moe_tiny/forward.json"))["sequences"];
}

TEST(LladaMoeForward, InfoFromConfigAndGguf) {
  for (const char* rel : kSources) {
    auto m = load(rel);
    ASSERT_TRUE(m) << rel;
    const ModelInfo& i = m->info();
    EXPECT_EQ(i.architecture, "llada-moe") << rel;
    EXPECT_EQ(i.vocab_size, 512);
    EXPECT_EQ(i.d_model, 64);
    EXPECT_EQ(i.n_layers, 2);
    EXPECT_EQ(i.n_heads, 4);
    EXPECT_EQ(i.n_kv_heads, 4);
    EXPECT_EQ(i.head_dim, 16);
    EXPECT_EQ(i.n_experts, 8);
    EXPECT_EQ(i.n_experts_used, 2);
    EXPECT_EQ(i.mask_id, 503);
    EXPECT_EQ(i.eos_id, 500);
    EXPECT_EQ(i.pad_id, 500);
    EXPECT_EQ(i.bos_id, -1);
    EXPECT_EQ(i.block_size, 0);  // LLaDA's bidirectional loop, not a block-diffusion family
    EXPECT_FALSE(i.shift_logits);
    EXPECT_EQ(i.precision, Precision::kF32);
  }
  EXPECT_EQ(load(kSources[0])->info().n_params, load(kSources[1])->info().n_params);
}

TEST(LladaMoeForward, LogitsMatchLlamaCpp) {
  int checked = 0;
  for (const char* rel : kSources) {
    auto m = load(rel);
    ASSERT_TRUE(m) << rel;
    const int64_t V = m->info().vocab_size;
    for (const auto& seq : sequences()) {
      const auto ids = seq["input_ids"].get<std::vector<int32_t>>();
      const auto got = logits(*m, ids);
      const std::string file = seq["logits_file"].get<std::string>();
      const auto want = test::read_npy(test::data_path("oracle/ar/" + file));
      ASSERT_EQ(want.shape, (std::vector<int64_t>{static_cast<int64_t>(ids.size()), V})) << file;
      ASSERT_EQ(got.size(), want.data.size()) << file;
      float worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want.data[i]));
      EXPECT_LT(worst, 1e-4f) << rel << " " << file;  // oracle/ar README §4: f32 tolerance
      const auto argmax = seq["argmax"].get<std::vector<int64_t>>();
      for (size_t t = 0; t < ids.size(); ++t) {
        const auto row = got.begin() + static_cast<int64_t>(t) * V;
        EXPECT_EQ(std::max_element(row, row + V) - row, argmax[t]) << rel << " " << file << " position " << t;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4);  // two sequences, two sources
}

// llama.cpp's GGUF holds the safetensors tensors bit for bit (stacked experts), so the two loads must agree
// exactly.
TEST(LladaMoeForward, GgufGivesTheHfBits) {
  auto hf = load(kSources[0]);
  auto gg = load(kSources[1]);
  ASSERT_TRUE(hf && gg);
  int checked = 0;
  for (const auto& seq : sequences()) {
    const auto ids = seq["input_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(logits(*hf, ids), logits(*gg, ids)) << seq["id"];
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

}  // namespace
}  // namespace dllm
