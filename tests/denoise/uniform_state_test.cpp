// The uniform-state sampler (DiffusionGemma, denoise/uniform_state.h) against the reference's goldens
// (tests/data/dgemma, README §5-6): the scripted decoder replays case default_p0_n2_s12's recorded logits and
// checks every input the loop gives it; fed the case's tapes, the loop must reproduce the generated tokens,
// every step's temperature, samples, accept mask and stop flags, the decoder calls and tokens_per_forward.
#include "denoise/uniform_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "scripted_canvas_decoder.h"
#include "test_util.h"

namespace dllm {
namespace {

using nlohmann::json;
using test::flat;

const char* const kModels[] = {"dgemma_tiny_f32", "dgemma_tiny_bf16", "dgemma_tiny_b_bf16"};

std::vector<json> records(const std::string& model) {
  std::ifstream in(test::data_path("dgemma/golden/" + model + "/generate.jsonl"));
  std::vector<json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  if (out.empty()) throw std::runtime_error(model + ": no generate.jsonl records");
  return out;
}

json record(const std::string& model, const std::string& id) {
  for (json& r : records(model))
    if (r.at("id") == id) return r;
  throw std::runtime_error(model + ": no case " + id);
}

std::string temp_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("dllm_uniform_state_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path.string();
}

// The record as read_random_tape reads it: a generate.jsonl line is a tape file.
RandomTape tape_of(const json& r, const std::string& name) {
  const std::string path = temp_file(name + ".json", r.dump());
  Expected<RandomTape> tape = read_random_tape(path);
  std::filesystem::remove(path);
  return tape.value();
}

// default_p0_n2_s12 of one model: its record, scripted decoder, model and the call's params.
struct Case {
  explicit Case(const std::string& model, bool check = true)
      : r(record(model, "default_p0_n2_s12")),
        decoder(model, r,
                test::read_npy(test::data_path("dgemma/" + r.at("step_raw_logits_file").get<std::string>())),
                check),
        exp_q(test::read_npy(test::data_path("dgemma/" + r.at("tape_exponential_file").get<std::string>()))),
        model(exp_q.shape[2], &decoder) {
    for (const auto& row : r.at("prompt_ids")) prompts.push_back(row.get<std::vector<int32_t>>());
    const json& kw = r.at("kwargs");
    auto& u = params.uniform_state;
    u.max_new_tokens = kw.at("max_new_tokens").get<int64_t>();
    u.max_denoising_steps = kw.at("max_denoising_steps").get<int64_t>();
    u.t_min = kw.at("t_min").get<double>();
    u.t_max = kw.at("t_max").get<double>();
    u.entropy_bound = kw.at("entropy_bound").get<double>();
    u.stability_threshold = kw.at("stability_threshold").get<int64_t>();
    u.confidence_threshold = kw.at("confidence_threshold").get<double>();
    params.tape = std::make_shared<RandomTape>(tape_of(r, model));
    const json& canvases = r.at("canvases");
    for (size_t i = 0; i < canvases.size(); ++i)
      for (const auto& step : canvases[i].at("steps")) steps.push_back({static_cast<int64_t>(i), step});
  }
  int64_t length() const { return decoder.canvas_length(); }

  json r;
  test::ScriptedCanvasDecoder decoder;
  test::NpyArray exp_q;  // [calls, batch * L, V]
  test::ScriptedCanvasModel model;
  std::vector<std::vector<int32_t>> prompts;
  GenerateParams params;
  std::vector<std::pair<int64_t, json>> steps;  // (canvas, step record) in call order
};

struct Seen {
  std::vector<UniformStepTrace> traces;  // its spans are dead after the step: copied out below
  std::vector<std::vector<int32_t>> samples;
  std::vector<std::vector<uint8_t>> accepted, stopped;
  std::vector<std::vector<float>> entropy;
  std::vector<StepEvent> events;
  std::vector<std::vector<std::vector<int32_t>>> event_canvas;
  std::vector<std::vector<std::vector<int64_t>>> event_committed;

  UniformStateHooks hooks() {
    UniformStateHooks h;
    h.trace = [this](const UniformStepTrace& t) {
      traces.push_back(t);
      samples.emplace_back(t.samples.begin(), t.samples.end());
      accepted.emplace_back(t.accepted.begin(), t.accepted.end());
      stopped.emplace_back(t.stopped.begin(), t.stopped.end());
      entropy.emplace_back(t.entropy.begin(), t.entropy.end());
    };
    return h;
  }
  StepCallback on_step() {
    return [this](const StepEvent& e) {
      events.push_back(e);
      event_canvas.push_back(*e.canvas);
      event_committed.push_back(*e.committed);
      return true;
    };
  }
};

// Everything the record says the reference did, against what the loop did.
void expect_reference_run(Case& c, Expected<GenerateResult>& got, const Seen& seen) {
  ASSERT_TRUE(got.ok()) << got.error();
  const GenerateResult& res = got.value();
  const json& r = c.r;
  EXPECT_EQ(res.outputs, r.at("generated").get<std::vector<std::vector<int32_t>>>());
  EXPECT_EQ(res.forwards, r.at("num_decoder_calls").get<int64_t>());
  EXPECT_EQ(c.decoder.calls(), r.at("num_decoder_calls").get<int64_t>());
  EXPECT_EQ(res.canvases_run, r.at("num_canvases").get<int64_t>());
  EXPECT_EQ(res.tokens_per_forward, r.at("tokens_per_forward").get<std::vector<double>>());
  ASSERT_EQ(seen.traces.size(), c.steps.size());
  const int64_t L = c.length();
  for (size_t k = 0; k < c.steps.size(); ++k) {
    const auto& [canvas, step] = c.steps[k];
    SCOPED_TRACE("step " + std::to_string(k));
    const UniformStepTrace& t = seen.traces[k];
    EXPECT_EQ(t.canvas, canvas);
    EXPECT_EQ(t.cur_step, step.at("cur_step").get<int64_t>());
    EXPECT_EQ(t.temperature, step.at("temperature").get<float>());  // bit for bit
    EXPECT_EQ(seen.samples[k], flat(step.at("sample_tape")));
    const std::vector<int32_t> want_accepted = flat(step.at("accepted"));
    EXPECT_EQ(std::vector<int32_t>(seen.accepted[k].begin(), seen.accepted[k].end()), want_accepted);
    EXPECT_EQ(std::vector<int32_t>(seen.stopped[k].begin(), seen.stopped[k].end()),
              step.at("stop_flags").get<std::vector<int32_t>>());
    const std::vector<float> want_entropy = [&] {
      std::vector<float> e;
      for (const auto& row : step.at("entropy"))
        for (const auto& v : row) e.push_back(v.get<float>());
      return e;
    }();
    for (size_t i = 0; i < want_entropy.size(); ++i) EXPECT_NEAR(seen.entropy[k][i], want_entropy[i], 2e-5);
    // The stream: the canvas after renoise at the end of the generated region, the accepted positions in it.
    const std::vector<int32_t> renoised = flat(step.at("renoised_canvas"));
    ASSERT_EQ(seen.events[k].block, canvas);
    ASSERT_EQ(seen.events[k].forwards, static_cast<int64_t>(k + 1));
    for (size_t b = 0; b < seen.event_canvas[k].size(); ++b) {
      const auto& row = seen.event_canvas[k][b];
      ASSERT_EQ(static_cast<int64_t>(row.size()), (canvas + 1) * L);
      EXPECT_TRUE(std::equal(row.end() - L, row.end(), renoised.begin() + static_cast<int64_t>(b) * L));
      std::vector<int32_t> mask(static_cast<size_t>(L), 0);
      for (int64_t pos : seen.event_committed[k][b]) mask[static_cast<size_t>(pos - canvas * L)] = 1;
      EXPECT_TRUE(std::equal(mask.begin(), mask.end(), want_accepted.begin() + static_cast<int64_t>(b) * L));
    }
  }
}

class UniformStateGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(UniformStateGolden, ReplaysTheTapes) {
  Case c(GetParam());
  Seen seen;
  auto got = generate_uniform_state(c.model, c.decoder, c.prompts, c.params, seen.on_step(), seen.hooks());
  expect_reference_run(c, got, seen);
}

// Samples drawn as argmax p / q from torch's own Exp(1) variates (tape_exponential_file), not taken from the
// tape: the multinomial the loop runs without a tape is the reference's, draw for draw.
TEST_P(UniformStateGolden, ReplaysTorchsExponentialDraws) {
  Case c(GetParam());
  auto tape = std::make_shared<RandomTape>(*c.params.tape);
  tape->samples.clear();
  c.params.tape = tape;
  Seen seen;
  UniformStateHooks hooks = seen.hooks();
  const int64_t rows = c.exp_q.shape[1], V = c.exp_q.shape[2];
  hooks.exponential = [&](int64_t row, std::span<float> q) {
    const int64_t call = static_cast<int64_t>(seen.traces.size());
    ASSERT_LT(call, c.exp_q.shape[0]);
    std::copy_n(c.exp_q.data.begin() + (call * rows + row) * V, V, q.begin());
  };
  auto got = generate_uniform_state(c.model, c.decoder, c.prompts, c.params, seen.on_step(), hooks);
  expect_reference_run(c, got, seen);
}

// decoder_input_ids: a given first canvas replaces the initial draw, which is still consumed (G:985-987):
// with that draw on the tape overwritten, the run is the reference's.
TEST_P(UniformStateGolden, GivenCanvasReplacesTheFirstDrawOnly) {
  Case c(GetParam());
  auto tape = std::make_shared<RandomTape>(*c.params.tape);
  for (auto& row : tape->randint[0]) std::fill(row.begin(), row.end(), 7);
  c.params.tape = tape;
  c.params.canvas_ids =
      c.r.at("canvases")[0].at("initial_canvas_tape").get<std::vector<std::vector<int32_t>>>();
  Seen seen;
  auto got = generate_uniform_state(c.model, c.decoder, c.prompts, c.params, seen.on_step(), seen.hooks());
  expect_reference_run(c, got, seen);
}

INSTANTIATE_TEST_SUITE_P(Models, UniformStateGolden, ::testing::ValuesIn(kModels),
                         [](const auto& info) { return std::string(info.param); });

// The two pieces every golden step pins down, over every case of every model (greedy, default, 48-step
// gencfg): the float32 temperature bit for bit, and the accept mask from the reference's own entropies.
TEST(UniformState, TemperatureAndAcceptMaskMatchEveryGoldenStep) {
  int64_t checked = 0;
  for (const char* model : kModels)
    for (const json& r : records(model)) {
      const json& kw = r.at("kwargs");
      const UniformStateParams d = test::read_generation_config(
          test::data_path(std::string("dgemma/models/") + model + "/generation_config.json"));
      const int64_t N = kw.value("max_denoising_steps", *d.max_denoising_steps);
      const double t_min = kw.value("t_min", *d.t_min), t_max = kw.value("t_max", *d.t_max),
                   bound = kw.value("entropy_bound", *d.entropy_bound);
      for (const auto& canvas : r.at("canvases"))
        for (const auto& step : canvas.at("steps")) {
          SCOPED_TRACE(std::string(model) + " " + r.at("id").get<std::string>() + " cur_step " +
                       std::to_string(step.at("cur_step").get<int64_t>()));
          EXPECT_EQ(uniform_state_temperature(t_min, t_max, step.at("cur_step").get<int64_t>(), N),
                    step.at("temperature").get<float>());
          for (size_t b = 0; b < step.at("entropy").size(); ++b) {
            const auto H = step.at("entropy")[b].get<std::vector<float>>();
            std::vector<uint8_t> mask(H.size());
            entropy_bound_mask(H, bound, mask);
            EXPECT_EQ(std::vector<int32_t>(mask.begin(), mask.end()),
                      step.at("accepted")[b].get<std::vector<int32_t>>());
          }
          ++checked;
        }
    }
  EXPECT_GT(checked, 200);
}

TEST(UniformState, GenerateRunsItOnACanvasModelAndRefusesInfill) {
  Case c("dgemma_tiny_f32");
  Expected<GenerateResult> got = generate(c.model, c.prompts, c.params);
  ASSERT_TRUE(got.ok()) << got.error();
  EXPECT_EQ(got->outputs, c.r.at("generated").get<std::vector<std::vector<int32_t>>>());
  const auto filled = infill(c.model, c.prompts, c.params);
  ASSERT_FALSE(filled.ok());
  EXPECT_NE(filled.error().find("infilling"), std::string::npos) << filled.error();
}

// Without a tape the seed draws the canvases and samples: the same seed gives the same draws. (The replayed
// logits ignore the canvas, so the draws show in the samples and streamed canvases, not in the argmax
// output.)
TEST(UniformState, SeededRunIsReproducible) {
  std::vector<std::vector<int32_t>> draws;
  for (uint64_t seed : {5u, 5u, 6u}) {
    Case c("dgemma_tiny_f32", /*check=*/false);
    c.params.tape = nullptr;
    c.params.seed = seed;
    Seen seen;
    auto got = generate_uniform_state(c.model, c.decoder, c.prompts, c.params, seen.on_step(), seen.hooks());
    ASSERT_TRUE(got.ok()) << got.error();
    ASSERT_FALSE(seen.samples.empty());
    std::vector<int32_t> all;
    for (size_t k = 0; k < seen.samples.size(); ++k) {
      all.insert(all.end(), seen.samples[k].begin(), seen.samples[k].end());
      all.insert(all.end(), seen.event_canvas[k][0].begin(), seen.event_canvas[k][0].end());
    }
    for (int32_t t : all) ASSERT_TRUE(t >= 0 && t < 512) << t;
    draws.push_back(all);
  }
  EXPECT_EQ(draws[0], draws[1]);
  EXPECT_NE(draws[0], draws[2]);
}

std::string error_of(Case& c) {
  const auto got = generate_uniform_state(c.model, c.decoder, c.prompts, c.params);
  return got.ok() ? "(no error)" : got.error();
}

TEST(UniformState, TapeEntryOfTheWrongShapeIsAnError) {
  Case c("dgemma_tiny_f32");
  auto tape = std::make_shared<RandomTape>(*c.params.tape);
  tape->randint[3] = {std::vector<int32_t>(12, 1)};
  c.params.tape = tape;
  EXPECT_NE(error_of(c).find("random tape: tape_randint entry 3 is 1x12, the loop needs 1x16"),
            std::string::npos)
      << error_of(c);
}

TEST(UniformState, TapeThatRunsOutIsAnError) {
  Case c("dgemma_tiny_f32");
  auto tape = std::make_shared<RandomTape>(*c.params.tape);
  tape->samples.resize(5);
  c.params.tape = tape;
  EXPECT_NE(error_of(c).find("random tape ran out of tape_samples after 5 draws"), std::string::npos)
      << error_of(c);
}

TEST(UniformState, TapeIdOutsideTheVocabularyIsAnError) {
  Case c("dgemma_tiny_f32");
  auto tape = std::make_shared<RandomTape>(*c.params.tape);
  tape->samples[2][0][4] = 512;
  c.params.tape = tape;
  EXPECT_NE(error_of(c).find("tape_samples entry 2 holds id 512, outside the vocabulary [0, 512)"),
            std::string::npos)
      << error_of(c);
}

TEST(UniformState, PromptsOfUnequalLengthAreAnError) {
  Case c("dgemma_tiny_f32");
  c.prompts = {c.prompts[0], std::vector<int32_t>(c.prompts[0].begin(), c.prompts[0].end() - 1)};
  const std::string e = error_of(c);
  EXPECT_NE(e.find("prompts must have equal length"), std::string::npos) << e;
  EXPECT_NE(e.find("left padding is not supported"), std::string::npos) << e;
}

TEST(UniformState, ReadRandomTapeNamesTheFileAndKey) {
  const std::string no_key = temp_file("no_key.json", R"({"tape_randint": []})");
  const auto missing = read_random_tape(no_key);
  std::filesystem::remove(no_key);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find(no_key), std::string::npos) << missing.error();
  EXPECT_NE(missing.error().find("no key 'tape_samples'"), std::string::npos) << missing.error();

  const std::string bad =
      temp_file("bad.json", R"({"tape_randint": [[[1, 2]], [[1, "x"]]], "tape_samples": []})");
  const auto wrong = read_random_tape(bad);
  std::filesystem::remove(bad);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().find("tape_randint entry 1 is not a [batch][canvas] list of integer ids"),
            std::string::npos)
      << wrong.error();

  const auto absent = read_random_tape("/nonexistent/tape.json");
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.error().find("/nonexistent/tape.json"), std::string::npos) << absent.error();
}

}  // namespace
}  // namespace dllm
