// DiffusionGemma's generate() end to end against the reference's generation goldens (tests/data/dgemma: the
// official transformers generate() on three tiny checkpoints, every random draw recorded): the real encoder
// and decoder, the uniform-state sampler fed the recorded tapes, and the kwargs read by the reference's names
// as
// `--generation-config` reads them. Token for token: the generated canvases, the decoder calls, the canvases
// and tokens_per_forward. The same cases on an F32 GGUF copy of each checkpoint.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "convert/gguf_convert.h"
#include "model/diffusion_gemma.h"
#include "test_util.h"

namespace dllm {
namespace {

const char* const kModels[] = {"dgemma_tiny_f32", "dgemma_tiny_bf16", "dgemma_tiny_b_bf16"};

std::vector<nlohmann::json> records(const std::string& name) {
  std::vector<nlohmann::json> out;
  std::istringstream lines(test::read_file(test::data_path("dgemma/golden/" + name + "/generate.jsonl")));
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  if (out.empty()) throw std::runtime_error(name + ": no generation records");
  return out;
}

// The record's generate() call as dllm runs it: its kwargs over the model's generation_config.json, the
// tapes.
GenerateParams params_of(const nlohmann::json& rec) {
  GenerateParams p;
  read_uniform_state_params(rec["kwargs"], "kwargs", p.uniform_state);
  if (rec["kwargs"].contains("decoder_input_ids"))
    p.canvas_ids = rec["kwargs"]["decoder_input_ids"].get<std::vector<std::vector<int32_t>>>();
  RandomTape tape;
  tape.randint = rec["tape_randint"].get<decltype(tape.randint)>();
  tape.samples = rec["tape_samples"].get<decltype(tape.samples)>();
  p.tape = std::make_shared<const RandomTape>(std::move(tape));
  return p;
}

int replay_all(Model& model, const std::string& name) {
  int checked = 0;
  for (const auto& rec : records(name)) {
    SCOPED_TRACE(rec["id"].get<std::string>());
    const auto prompts = rec["prompt_ids"].get<std::vector<std::vector<int32_t>>>();
    const GenerateResult r = generate(model, prompts, params_of(rec)).value();
    EXPECT_EQ(r.outputs, rec["generated"].get<std::vector<std::vector<int32_t>>>());
    EXPECT_EQ(r.forwards, rec["num_decoder_calls"].get<int64_t>());
    EXPECT_EQ(r.canvases_run, rec["num_canvases"].get<int64_t>());
    const auto tpf = rec["tokens_per_forward"].get<std::vector<double>>();
    EXPECT_EQ(r.tokens_per_forward.size(), tpf.size());
    for (size_t i = 0; i < std::min(tpf.size(), r.tokens_per_forward.size()); ++i)
      EXPECT_NEAR(r.tokens_per_forward[i], tpf[i], 1e-9);
    ++checked;
  }
  return checked;
}

std::shared_ptr<Model> load(const std::string& path) {
  LoadOptions o;
  o.precision = Precision::kF32;  // the goldens are f32 compute (bf16 files upcast)
  return Model::load(path, o).value();
}

class DiffusionGemmaGenerate : public ::testing::TestWithParam<const char*> {};

TEST_P(DiffusionGemmaGenerate, ReplaysEveryPublicCaseTokenForToken) {
  const std::string name = GetParam();
  std::shared_ptr<Model> model = load(test::data_path("dgemma/models/" + name));
  EXPECT_EQ(replay_all(*model, name), 3);
}

TEST_P(DiffusionGemmaGenerate, AnF32GgufCopyGivesTheSameTokens) {
  const std::string name = GetParam();
  const std::string path =
      (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + "_generate.gguf"))
          .string();
  convert_hf_to_gguf(test::data_path("dgemma/models/" + name), path, GgmlType::kF32);
  std::shared_ptr<Model> model = load(path);
  EXPECT_EQ(replay_all(*model, name), 3);
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Models, DiffusionGemmaGenerate, ::testing::ValuesIn(kModels));

TEST(DiffusionGemmaGenerate, ACanvasOfTheWrongLengthIsAClearError) {
  std::shared_ptr<Model> model = load(test::data_path("dgemma/models/dgemma_tiny_f32"));
  GenerateParams p;
  p.uniform_state.max_new_tokens = 16;
  p.canvas_ids = {std::vector<int32_t>(20, 5)};
  auto r = generate(*model, {{2, 10, 11}}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("20"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace dllm
