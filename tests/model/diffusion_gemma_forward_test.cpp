// DiffusionGemma's encoder and decoder against the reference's forward goldens (tests/data/dgemma: the
// official transformers files run in f32 on three tiny checkpoints): the encoder's last hidden state after
// each call (prompt, then each committed canvas), the decoder's softcapped logits without and with
// self-conditioning.
#include <gtest/gtest.h>

#include "test_util.h"

namespace dllm {
namespace {

const char* const kModels[] = {"dgemma_tiny_f32", "dgemma_tiny_bf16", "dgemma_tiny_b_bf16"};

std::shared_ptr<Model> load(const std::string& name) {
  LoadOptions o;
  o.precision = Precision::kF32;  // the goldens are f32 compute (bf16 files upcast)
  return Model::load(test::data_path("dgemma/models/" + name), o).value();
}

std::vector<int32_t> ids(const nlohmann::json& j) {
  return j.get<std::vector<int32_t>>();
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(double(a[i]) - b[i]));
  return m;
}

class DiffusionGemmaForward : public ::testing::TestWithParam<const char*> {};

TEST_P(DiffusionGemmaForward, MatchesReferenceLogitsAndEncoderStates) {
  const std::string name = GetParam();
  std::shared_ptr<Model> model = load(name);
  CanvasDecoder* dec = model->canvas_decoder();
  ASSERT_NE(dec, nullptr);
  const auto cases = test::read_cases(test::data_path("dgemma/golden/" + name + "/forward.json"));
  int checked = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c["id"].get<std::string>());
    auto cache = dec->new_cache(1);
    const auto files = c["encoder_last_hidden_state_files"];
    std::vector<std::vector<int32_t>> encoded = {ids(c["prompt_ids"])};
    for (const auto& canvas : c["committed_canvases"]) encoded.push_back(ids(canvas));
    ASSERT_EQ(files.size(), encoded.size());
    for (size_t i = 0; i < encoded.size(); ++i) {
      const std::vector<float> hidden = dec->encode(*cache, encoded[i], /*hidden=*/true).value();
      const auto want = test::read_npy(test::data_path("dgemma/" + files[i].get<std::string>()));
      EXPECT_LT(max_abs_diff(hidden, want.data), 1e-4) << "encoder call " << i;
    }
    EXPECT_EQ(cache->length(), c["decoder_position_start"].get<int64_t>());
    const std::vector<int32_t> canvas = ids(c["canvas_ids"]);
    std::vector<float> logits = dec->decode(*cache, canvas, {}).value();
    if (c.contains("first_call_logits_file")) {
      const auto first =
          test::read_npy(test::data_path("dgemma/" + c["first_call_logits_file"].get<std::string>()));
      EXPECT_LT(max_abs_diff(logits, first.data), 2e-4) << "first decoder call";
      for (float& l : logits) l /= 0.8f;  // the case's self-conditioning: previous logits / 0.8
      logits = dec->decode(*cache, canvas, logits).value();
    }
    const auto want = test::read_npy(test::data_path("dgemma/" + c["logits_file"].get<std::string>()));
    EXPECT_LT(max_abs_diff(logits, want.data), 2e-4);
    const int64_t vocab = model->info().vocab_size;
    for (size_t r = 0; r < canvas.size(); ++r) {
      const float* row = logits.data() + r * vocab;
      EXPECT_EQ(std::max_element(row, row + vocab) - row, c["argmax"][r].get<int64_t>()) << "position " << r;
    }
    EXPECT_EQ(cache->length(), c["decoder_position_start"].get<int64_t>()) << "the decoder wrote the cache";
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

INSTANTIATE_TEST_SUITE_P(Models, DiffusionGemmaForward, ::testing::ValuesIn(kModels));

TEST(DiffusionGemmaForward, BatchRowsMatchSingleRows) {
  std::shared_ptr<Model> model = load("dgemma_tiny_b_bf16");
  CanvasDecoder* dec = model->canvas_decoder();
  const std::vector<int32_t> p0 = {2, 10, 20, 30, 40, 50, 60, 70, 80},
                             p1 = {2, 11, 21, 31, 41, 51, 61, 71, 81};
  const int64_t L = dec->canvas_length(), vocab = model->info().vocab_size;
  std::vector<int32_t> c0(L), c1(L);
  for (int64_t i = 0; i < L; ++i)
    c0[i] = static_cast<int32_t>(5 + 7 * i), c1[i] = static_cast<int32_t>(9 + 3 * i);
  auto both = dec->new_cache(2);
  std::vector<int32_t> prompts = p0, canvases = c0;
  prompts.insert(prompts.end(), p1.begin(), p1.end());
  canvases.insert(canvases.end(), c1.begin(), c1.end());
  dec->encode(*both, prompts).value();
  const std::vector<float> batched = dec->decode(*both, canvases, {}).value();
  for (int row = 0; row < 2; ++row) {
    auto one = dec->new_cache(1);
    dec->encode(*one, row ? p1 : p0).value();
    const std::vector<float> single = dec->decode(*one, row ? c1 : c0, {}).value();
    const std::vector<float> part(batched.begin() + row * L * vocab, batched.begin() + (row + 1) * L * vocab);
    EXPECT_LT(max_abs_diff(part, single), 1e-5) << "row " << row;
  }
}

TEST(DiffusionGemmaForward, BadInputIsAClearError) {
  std::shared_ptr<Model> model = load("dgemma_tiny_f32");
  CanvasDecoder* dec = model->canvas_decoder();
  auto cache = dec->new_cache(2);
  const std::vector<int32_t> odd = {2, 3, 4};
  auto r = dec->encode(*cache, odd);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("3 tokens for a batch of 2"), std::string::npos) << r.error();
  const std::vector<int32_t> big = {2, 512};
  r = dec->encode(*cache, big);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("token id 512 is outside the vocabulary"), std::string::npos) << r.error();
  ForwardInput in;
  EXPECT_FALSE(model->forward(in));
}

}  // namespace
}  // namespace dllm
