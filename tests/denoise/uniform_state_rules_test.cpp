// The uniform-state sampler's rules that the replayable golden case never reaches (it runs every step of
// every canvas, batch 1): the stop rule per row with finished rows frozen, EOS and pad, max_length, the
// per-row decoder-call count, cancelling; and the accept mask's rounding at its boundary. A synthetic
// decoder: row 0 is confident (one logit of 30 per position, tokens 2 3 1 5: an EOS at position 2), row 1 is
// not (near-flat logits, argmax 3), whatever the canvas.
#include <gtest/gtest.h>

#include "denoise/uniform_state.h"

namespace dllm {
namespace {

constexpr int64_t kV = 8, kL = 4, kB = 2;
constexpr int32_t kRow0[kL] = {2, 3, 1, 5};

class CountingCache : public EncoderCache {
 public:
  int64_t batch() const override { return kB; }
  int64_t length() const override { return length_; }
  int64_t length_ = 0;
};

class SyntheticDecoder : public CanvasDecoder {
 public:
  SyntheticDecoder() {
    defaults_.max_new_tokens = 8;
    defaults_.max_denoising_steps = 6;
    defaults_.t_min = 0.4;
    defaults_.t_max = 0.8;
    defaults_.entropy_bound = 0.1;
    defaults_.stability_threshold = 1;
    defaults_.confidence_threshold = 0.005;
    defaults_.eos_ids = std::vector<int32_t>{1};
    defaults_.pad_id = 0;
  }
  int64_t canvas_length() const override { return kL; }
  const UniformStateParams& generation_defaults() const override { return defaults_; }
  std::unique_ptr<EncoderCache> new_cache(int64_t) const override {
    return std::make_unique<CountingCache>();
  }
  Expected<std::vector<float>> encode(EncoderCache& cache, std::span<const int32_t> tokens, bool) override {
    encoded.emplace_back(tokens.begin(), tokens.end());
    static_cast<CountingCache&>(cache).length_ += static_cast<int64_t>(tokens.size()) / kB;
    return std::vector<float>{};
  }
  Expected<std::vector<float>> decode(const EncoderCache&, std::span<const int32_t> canvas,
                                      std::span<const float> sc) override {
    canvases.emplace_back(canvas.begin(), canvas.end());
    self_conditioning.emplace_back(sc.begin(), sc.end());
    return logits();
  }
  static std::vector<float> logits() {
    std::vector<float> x(static_cast<size_t>(kB * kL * kV), 0.0f);
    for (int64_t i = 0; i < kL; ++i) {
      x[i * kV + kRow0[i]] = 30.0f;
      x[(kL + i) * kV + 3] = 0.01f;
    }
    return x;
  }

  std::vector<std::vector<int32_t>> encoded, canvases;
  std::vector<std::vector<float>> self_conditioning;

 private:
  UniformStateParams defaults_;
};

class SyntheticModel : public Model {
 public:
  SyntheticModel() { info_.vocab_size = kV; }
  const ModelInfo& info() const override { return info_; }
  Expected<std::vector<float>> forward(const ForwardInput&) override {
    return Expected<std::vector<float>>::failure("no forward");
  }
  CanvasDecoder* canvas_decoder() override { return &decoder; }
  SyntheticDecoder decoder;

 private:
  ModelInfo info_;
};

const std::vector<std::vector<int32_t>> kPrompts = {{2, 5}, {2, 6}};

GenerateResult run(SyntheticModel& m, const GenerateParams& p, const StepCallback& on_step = {}) {
  Expected<GenerateResult> r = generate(m, kPrompts, p, on_step);
  if (!r.ok()) throw std::runtime_error(r.error());
  return r.value();
}

// Row 0 stops once its argmax is stable (the second step) and stays frozen while row 1 runs all 6 steps; its
// EOS ends it after canvas 0 (pad after the EOS, a pad canvas after), row 1 runs to max_new_tokens.
TEST(UniformStateRules, RowsStopAndFreezeOneByOne) {
  SyntheticModel m;
  GenerateParams p;
  const GenerateResult r = run(m, p);
  EXPECT_EQ(r.outputs,
            (std::vector<std::vector<int32_t>>{{2, 3, 1, 0, 0, 0, 0, 0}, {3, 3, 3, 3, 3, 3, 3, 3}}));
  EXPECT_EQ(r.canvases_run, 2);
  EXPECT_EQ(r.forwards, 12);
  // Row 0: 3 tokens other than pad over the 2 calls it was unfinished; row 1: 8 over 12 (float32 division).
  EXPECT_EQ(r.tokens_per_forward, (std::vector<double>{1.5, static_cast<double>(8.0f / 12.0f)}));
  // The encoder saw the prompt, then canvas 0 as committed (row 0 padded after its EOS).
  ASSERT_EQ(m.decoder.encoded.size(), 2u);
  EXPECT_EQ(m.decoder.encoded[1], (std::vector<int32_t>{2, 3, 1, 0, 3, 3, 3, 3}));
  // Frozen row 0: from the third call of a canvas on, its canvas and self-conditioning are those after its
  // second step: the canvas it had then, and its second step's logits / T (cur_step 5).
  const float T5 = uniform_state_temperature(0.4, 0.8, 5, 6);
  const std::vector<float> x = SyntheticDecoder::logits();
  for (size_t k = 0; k < 6; ++k) {
    SCOPED_TRACE("call " + std::to_string(k));
    const auto& sc = m.decoder.self_conditioning[k];
    ASSERT_EQ(sc.empty(), k == 0);
    if (k < 2) continue;
    EXPECT_TRUE(std::equal(m.decoder.canvases[k].begin(), m.decoder.canvases[k].begin() + kL,
                           m.decoder.canvases[2].begin()));
    for (int64_t i = 0; i < kL * kV; ++i) ASSERT_EQ(sc[i], x[i] / T5) << i;
  }
}

// stability_threshold: 0 stops a confident row at its first step, n after n + 1 steps (the history starts at
// -1).
TEST(UniformStateRules, StabilityThresholdCountsSteps) {
  for (int64_t stability : {0, 1, 2, 3}) {
    SyntheticModel m;
    GenerateParams p;
    p.uniform_state.stability_threshold = stability;
    const GenerateResult r = run(m, p);
    EXPECT_EQ(r.tokens_per_forward[0], 3.0 / static_cast<double>(stability + 1)) << stability;
  }
  // Not confident: a threshold below row 0's mean entropy keeps it for all 6 steps.
  SyntheticModel m;
  GenerateParams p;
  p.uniform_state.confidence_threshold = 1e-300;
  EXPECT_EQ(run(m, p).tokens_per_forward[0], 0.5);
}

// max_length counts only when max_new_tokens is 256 (then the canvases are ceil((max_length - P) / L)); it
// also ends every row once the sequence reaches it, whatever max_new_tokens says.
TEST(UniformStateRules, MaxLengthRule) {
  SyntheticModel m1;
  GenerateParams p;
  p.uniform_state.max_new_tokens = 256;
  p.uniform_state.max_length = 2 + 5;
  EXPECT_EQ(run(m1, p).canvases_run, 2);
  SyntheticModel m2;
  p.uniform_state.max_new_tokens = 12;
  p.uniform_state.max_length = 2 + 4;
  const GenerateResult r = run(m2, p);
  EXPECT_EQ(r.canvases_run, 1);
  EXPECT_EQ(r.outputs[1], (std::vector<int32_t>{3, 3, 3, 3}));
  SyntheticModel m3;
  p.uniform_state.max_length.reset();
  EXPECT_EQ(run(m3, p).canvases_run, 3);
  SyntheticModel m4;
  p.uniform_state.max_new_tokens = 4;
  p.uniform_state.max_length = 2 + 12;
  EXPECT_EQ(run(m4, p).canvases_run, 1);
}

TEST(UniformStateRules, NoEosIdsMeansNoEosStop) {
  SyntheticModel m;
  GenerateParams p;
  p.uniform_state.eos_ids = std::vector<int32_t>{};
  EXPECT_EQ(run(m, p).outputs[0], (std::vector<int32_t>{2, 3, 1, 5, 2, 3, 1, 5}));
}

TEST(UniformStateRules, CallbackCancels) {
  SyntheticModel m;
  int64_t events = 0;
  const GenerateResult r = run(m, GenerateParams{}, [&](const StepEvent& e) {
    EXPECT_EQ(e.final_prefix->at(1), e.block * kL);
    return ++events < 3;
  });
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(events, 3);
  EXPECT_EQ(r.forwards, 3);
}

TEST(UniformStateRules, SettingsAreChecked) {
  SyntheticModel m;
  GenerateParams p;
  p.uniform_state.t_min = 0.9;
  const Expected<GenerateResult> r = generate(m, kPrompts, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("0 <= t_min < t_max"), std::string::npos) << r.error();
  p = GenerateParams{};
  p.canvas_ids = {{1, 2, 3}, {1, 2, 3, 4}};
  const Expected<GenerateResult> c = generate(m, kPrompts, p);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("canvas_ids row 0 has 3 ids, the canvas is 4"), std::string::npos) << c.error();
}

// The mask's rounding where it decides: the bound is inclusive and compared in float (c_1 = 0.1f, bound 0.1),
// and the cumsum accumulates in double, rounded per element (a float accumulator ends 1 ulp above the bound
// at the last position of the second row); ascending order, whatever the positions.
TEST(UniformStateRules, AcceptMaskRoundsAsTorch) {
  auto mask = [](std::vector<float> H, double bound) {
    std::vector<uint8_t> m(H.size());
    entropy_bound_mask(H, bound, m);
    return std::vector<int>(m.begin(), m.end());
  };
  EXPECT_EQ(mask({0.1f, 0.1f}, 0.1), (std::vector<int>{1, 1}));
  EXPECT_EQ(mask({0.006000002846121788f, 0.01492543425410986f, 0.023891711607575417f, 0.04248809441924095f},
                 0.04481714591383934),
            (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(mask({0.5f, 0.0f, 0.2f}, 0.1), (std::vector<int>{0, 1, 1}));
}

}  // namespace
}  // namespace dllm
