// Autoregressive families (qwen2, qwen3, llama) against llama.cpp: tiny random models in the Hugging Face
// layout and as llama.cpp-converted F32 GGUF files, with llama.cpp's prompt logits and greedy ids
// (tests/data/oracle/ar/README.md, copied from the shared oracle), plus a Llama-3.1 rope_scaling variant
// whose goldens come from an independent float64 forward (tools/oracle/make_llama3_rope_scaled.py). The
// prompt runs in one causal forward; greedy decoding then runs one token per forward on the KV cache, so the
// ids check the cached path and the logits the batched one.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "ar/token_sampler.h"
#include "convert/gguf_convert.h"
#include "dllm/dllm.h"
#include "test_util.h"

namespace dllm {
namespace {

struct ArCase {
  std::string name;    // models/<name>, golden/<name>
  std::string golden;  // greedy_f32.json (llama.cpp) or greedy_f64.json (float64 reference)
  std::string gguf;    // gguf/<file>; empty: converted from the HF directory here
};

void PrintTo(const ArCase& c, std::ostream* os) {
  *os << c.name;
}

std::string ar_path(const std::string& rel) {
  return test::data_path("oracle/ar/" + rel);
}

std::shared_ptr<Model> load(const std::string& path) {
  LoadOptions o;
  o.backend = test::backend();
  auto m = Model::load(path, o);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error());
  return m.ok() ? m.value() : nullptr;
}

// The model in the form asked: the HF directory, or its GGUF (shipped, else converted once into a temp dir).
std::string model_path(const ArCase& c, bool gguf) {
  if (!gguf) return ar_path("models/" + c.name);
  if (!c.gguf.empty()) return ar_path("gguf/" + c.gguf);
  const auto out = std::filesystem::temp_directory_path() / ("dllm_ar_" + c.name + ".gguf");
  if (!std::filesystem::exists(out))
    convert_hf_to_gguf(ar_path("models/" + c.name), out.string(), GgmlType::kF32);
  return out.string();
}

const std::vector<ArCase> kCases = {
    {"qwen2_tiny", "greedy_f32.json", "qwen2_tiny_f32.gguf"},
    {"qwen3_tiny", "greedy_f32.json", "qwen3_tiny_f32.gguf"},
    {"llama3_tiny", "greedy_f32.json", "llama3_tiny_f32.gguf"},
    {"llama31_tiny_rope_scaled", "greedy_f64.json", ""},
};

class ArGolden : public ::testing::TestWithParam<std::tuple<ArCase, bool>> {
 protected:
  const ArCase& arcase() const { return std::get<0>(GetParam()); }
  bool gguf() const { return std::get<1>(GetParam()); }
  std::vector<nlohmann::json> cases() const {
    return test::read_cases(ar_path("golden/" + arcase().name + "/" + arcase().golden));
  }
};

TEST_P(ArGolden, PromptLogitsWithinTolerance) {
  auto model = load(model_path(arcase(), gguf()));
  ASSERT_TRUE(model);
  EXPECT_TRUE(model->info().autoregressive);
  int checked = 0;
  for (const auto& c : cases()) {
    const auto prompt = c["prompt"].get<std::vector<int32_t>>();
    const auto ref = test::read_npy(ar_path(c["prompt_logits_file"].get<std::string>()));
    ForwardInput in;
    in.tokens = prompt;
    in.attention_block = 1;  // causal
    const auto logits = model->forward(in).value();
    ASSERT_EQ(logits.size(), ref.data.size());
    float worst = 0;
    for (size_t i = 0; i < logits.size(); ++i) worst = std::max(worst, std::abs(logits[i] - ref.data[i]));
    EXPECT_LE(worst, 1e-4f) << c["id"];
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST_P(ArGolden, GreedyIdsMatchTokenForToken) {
  auto model = load(model_path(arcase(), gguf()));
  ASSERT_TRUE(model);
  int checked = 0;
  for (const auto& c : cases()) {
    GenerateParams p;
    p.gen_length = c["n_new"].get<int64_t>();
    p.stop_ids = std::vector<int32_t>{};  // the goldens do not stop at end-of-generation ids
    const auto r = generate(*model, {c["prompt"].get<std::vector<int32_t>>()}, p).value();
    EXPECT_EQ(r.outputs.at(0), c["output"].get<std::vector<int32_t>>()) << c["id"];
    EXPECT_EQ(r.forwards, p.gen_length);  // one prefill, then one forward per token after the first
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// With the default stop rule the output is the golden's prefix up to and including the first
// end-of-generation id (qwen3_tiny meets one at step 11).
TEST_P(ArGolden, StopsAtTheFirstEndOfGeneration) {
  auto model = load(model_path(arcase(), gguf()));
  ASSERT_TRUE(model);
  const auto& eog = model->info().eog_ids;
  for (const auto& c : cases()) {
    const auto golden = c["output"].get<std::vector<int32_t>>();
    GenerateParams p;
    p.gen_length = static_cast<int64_t>(golden.size());
    const auto r = generate(*model, {c["prompt"].get<std::vector<int32_t>>()}, p).value();
    size_t end = 0;
    while (end < golden.size() && std::find(eog.begin(), eog.end(), golden[end]) == eog.end()) ++end;
    const std::vector<int32_t> want(golden.begin(), golden.begin() + std::min(end + 1, golden.size()));
    EXPECT_EQ(r.outputs.at(0), want) << c["id"];
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ArGolden,
                         ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + (std::get<1>(info.param) ? "_gguf" : "_hf");
                         });

TEST(ArInfo, SpecialIdsFromConfigAndGenerationConfig) {
  auto llama = load(ar_path("models/llama3_tiny"));
  ASSERT_TRUE(llama);
  EXPECT_EQ(llama->info().architecture, "llama");
  EXPECT_EQ(llama->info().mask_id, -1);
  EXPECT_EQ(llama->info().bos_id, 507);
  EXPECT_EQ(llama->info().eos_id, 511);
  // generation_config.json's eos_token_id [508, 511] and <|eot_id|>.
  EXPECT_EQ(std::set<int32_t>(llama->info().eog_ids.begin(), llama->info().eog_ids.end()),
            (std::set<int32_t>{508, 511}));
  auto qwen = load(ar_path("gguf/qwen2_tiny_f32.gguf"));
  ASSERT_TRUE(qwen);
  EXPECT_EQ(qwen->info().architecture, "qwen2");
  EXPECT_TRUE(std::find(qwen->info().eog_ids.begin(), qwen->info().eog_ids.end(), 511) !=
              qwen->info().eog_ids.end());  // <|im_end|>
}

TEST(ArGenerate, StreamsOneEventPerTokenAndCancels) {
  auto model = load(ar_path("models/qwen2_tiny"));
  ASSERT_TRUE(model);
  GenerateParams p;
  p.gen_length = 10;
  p.stop_ids = std::vector<int32_t>{};
  int events = 0;
  const auto full = generate(*model, {{1, 2, 3}}, p).value();
  const auto r = generate(*model, {{1, 2, 3}}, p, [&](const StepEvent& ev) {
                   ++events;
                   EXPECT_EQ(static_cast<int>(ev.canvas->at(0).size()), events);
                   EXPECT_EQ(ev.committed->at(0), std::vector<int64_t>{events - 1});
                   EXPECT_EQ(ev.final_prefix->at(0), events);
                   return events < 4;
                 }).value();
  EXPECT_EQ(events, 4);
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.outputs.at(0), std::vector<int32_t>(full.outputs[0].begin(), full.outputs[0].begin() + 4));
}

TEST(ArGenerate, SeededSamplingIsReproducibleAndTopKOneIsGreedy) {
  auto model = load(ar_path("models/llama3_tiny"));
  ASSERT_TRUE(model);
  GenerateParams p;
  p.gen_length = 16;
  p.stop_ids = std::vector<int32_t>{};
  const auto greedy = generate(*model, {{507, 1, 2}}, p).value().outputs[0];
  p.temperature = 1.5;
  p.seed = 7;
  const auto a = generate(*model, {{507, 1, 2}}, p).value().outputs[0];
  const auto b = generate(*model, {{507, 1, 2}}, p).value().outputs[0];
  EXPECT_EQ(a, b);
  EXPECT_NE(a, greedy);  // at T = 1.5 on a random model, 16 draws all equal to the argmax would be a bug
  p.top_k = 1;
  EXPECT_EQ(generate(*model, {{507, 1, 2}}, p).value().outputs[0], greedy);
}

TEST(ArGenerate, DiffusionSettingsAreErrors) {
  auto model = load(ar_path("models/qwen3_tiny"));
  ASSERT_TRUE(model);
  GenerateParams p;
  p.gen_length = 4;
  p.steps = 8;
  auto r = generate(*model, {{1, 2}}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("steps"), std::string::npos) << r.error();
  p.steps = 0;
  p.cfg_scale = 1.0;
  EXPECT_FALSE(generate(*model, {{1, 2}}, p).ok());
  p.cfg_scale = 0;
  auto i = infill(*model, {{1, 2, 3}}, p);
  ASSERT_FALSE(i.ok());
  EXPECT_NE(i.error().find("autoregressive"), std::string::npos) << i.error();
  EXPECT_FALSE(generate(*model, {{}}, p).ok());  // an empty prompt
}

TEST(TokenSampler, FiltersAndProbabilities) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  EXPECT_EQ(argmax_token(logits), 1);  // ties to the lower id
  std::vector<float> p(logits.size());
  token_probabilities(logits, {1.0, 0, 1.0}, p);
  double sum = 0;
  for (float v : p) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_NEAR(p[1] / p[2], std::exp(1.0), 1e-5);
  token_probabilities(logits, {1.0, 2, 1.0}, p);  // top-2: ids 1 and 3
  EXPECT_EQ(p[0] + p[2] + p[4], 0.0f);
  EXPECT_NEAR(p[1], 0.5, 1e-6);
  token_probabilities(logits, {1.0, 0, 0.5}, p);  // top-p 0.5: ids 1 and 3 hold 2 x 0.39 >= 0.5
  EXPECT_GT(p[1], 0);
  EXPECT_GT(p[3], 0);
  EXPECT_EQ(p[2], 0.0f);
  token_probabilities(logits, {0.0, 0, 1.0}, p);  // greedy: one-hot
  EXPECT_EQ(p[1], 1.0f);
  // Draw frequencies follow the probabilities.
  Rng rng(1);
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[sample_token(logits, {1.0, 0, 1.0}, rng)];
  token_probabilities(logits, {1.0, 0, 1.0}, p);
  for (int v = 0; v < 5; ++v) EXPECT_NEAR(counts[v] / static_cast<double>(n), p[v], 0.015) << v;
}

}  // namespace
}  // namespace dllm
