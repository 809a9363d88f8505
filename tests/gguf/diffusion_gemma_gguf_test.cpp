// DiffusionGemma in GGUF: `dllm convert` of the three tiny checkpoints and the loader of that layout. An F32
// file gives the safetensors load's logits bit for bit (encoder over a prompt and two committed canvases, a
// decoder call with self-conditioning); Q8_0 and Q4_K (Q4_0 where rows are not whole blocks) files load and
// stay close; a file without its config JSON fails naming the key.
#include <gtest/gtest.h>

#include <cmath>

#include "convert/gguf_convert.h"
#include "dllm/dllm.h"
#include "gguf_test_util.h"
#include "test_util.h"

namespace dllm {
namespace {

const char* const kModels[] = {"dgemma_tiny_f32", "dgemma_tiny_bf16", "dgemma_tiny_b_bf16"};

std::string model_dir(const std::string& name) {
  return test::data_path("dgemma/models/" + name);
}

std::shared_ptr<Model> load(const std::string& path, WeightFormat weights = WeightFormat::kAuto) {
  LoadOptions o;
  o.precision = Precision::kF32;
  o.weights = weights;
  auto m = Model::load(path, o);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error());
  return m.ok() ? m.value() : nullptr;
}

// The fwd_p0_commit2 path: prompt, two committed canvases, then a canvas decoded twice (the second time
// self-conditioned on the first call's logits / 0.8). Returns both calls' logits.
std::vector<float> run(Model& model) {
  CanvasDecoder* dec = model.canvas_decoder();
  EXPECT_NE(dec, nullptr);
  auto cache = dec->new_cache(1);
  const int64_t L = dec->canvas_length();
  std::vector<int32_t> canvas(static_cast<size_t>(L));
  dec->encode(*cache, std::vector<int32_t>{2, 339, 306, 14, 108, 238}).value();
  for (int c = 0; c < 2; ++c) {
    for (int64_t i = 0; i < L; ++i)
      canvas[static_cast<size_t>(i)] = static_cast<int32_t>((37 * i + 11 * c + 5) % 300);
    dec->encode(*cache, canvas).value();
  }
  for (int64_t i = 0; i < L; ++i) canvas[static_cast<size_t>(i)] = static_cast<int32_t>((13 * i + 7) % 300);
  std::vector<float> first = dec->decode(*cache, canvas, {}).value();
  std::vector<float> sc = first;
  for (float& v : sc) v /= 0.8f;
  std::vector<float> second = dec->decode(*cache, canvas, sc).value();
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

class DiffusionGemmaGguf : public ::testing::TestWithParam<const char*> {};

struct Difference {
  double max = 0, mean = 0;
  double argmax_agreement = 0;  // share of positions whose argmax is the same
};

Difference compare(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab) {
  EXPECT_EQ(got.size(), want.size());
  Difference d;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(std::isfinite(got[i]));
    const double e = std::abs(double(got[i]) - want[i]);
    d.max = std::max(d.max, e);
    d.mean += e / static_cast<double>(got.size());
  }
  const size_t rows = got.size() / static_cast<size_t>(vocab);
  for (size_t r = 0; r < rows; ++r) {
    const auto g = got.begin() + r * vocab, w = want.begin() + r * vocab;
    d.argmax_agreement +=
        (std::max_element(g, g + vocab) - g == std::max_element(w, w + vocab) - w) ? 1.0 / rows : 0;
  }
  return d;
}

TEST_P(DiffusionGemmaGguf, F32FileGivesTheSafetensorsLogitsAndQuantizedFilesRunTheirWeights) {
  const std::string name = GetParam();
  const std::vector<float> want = run(*load(model_dir(name)));
  // The tiny random models amplify rounding: f32 products over Q8_0-rounded weights already move the logits
  // by 0.2-0.4 on average (1 argmax in 6), Q4_0 weights at d = 48 / 64 by 0.5-1.7, and the int8 products'
  // rounding of the activations as much again. So a quantized file is checked loosely, against f32 products
  // over its own dequantised weights (WeightFormat::kDequantize) and against the safetensors load; a layout
  // fault (a wrong expert slice, a transposed matrix) moves them by several units. The quantized kernels
  // themselves are held to their scalar references in quant_test.cpp.
  struct Case {
    const char* type;
    double kernel_mean;     // |runtime - dequantised weights|, mean over the logits
    double reference_mean;  // |runtime - safetensors|, mean
  };
  int checked = 0;
  for (const Case c : {Case{"f32", 0.0, 0.0}, Case{"q8_0", 0.6, 0.8}, Case{"q4_k", 1.0, 2.5}}) {
    SCOPED_TRACE(c.type);
    const std::string path = test::temp_path(name + "_" + c.type + ".gguf");
    const ConvertResult r = convert_hf_to_gguf(model_dir(name), path, parse_gguf_type(c.type));
    EXPECT_EQ(r.architecture, "diffusion-gemma");
    std::shared_ptr<Model> model = load(path);
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->info().architecture, "diffusion_gemma");
    const int64_t vocab = model->info().vocab_size;
    const std::vector<float> got = run(*model);
    if (c.kernel_mean == 0) {
      EXPECT_EQ(got, want) << "an F32 file must give the safetensors load's logits bit for bit";
    } else {
      const Difference kernels = compare(got, run(*load(path, WeightFormat::kDequantize)), vocab);
      const Difference reference = compare(got, want, vocab);
      EXPECT_LE(kernels.mean, c.kernel_mean);
      EXPECT_GE(kernels.argmax_agreement, 0.5);
      EXPECT_LE(reference.mean, c.reference_mean);
    }
    std::remove(path.c_str());
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

INSTANTIATE_TEST_SUITE_P(Models, DiffusionGemmaGguf, ::testing::ValuesIn(kModels));

TEST(DiffusionGemmaGgufErrors, AFileWithoutItsConfigNamesTheKey) {
  const std::string path = test::temp_path("dgemma_noconfig_src.gguf"),
                    bad = test::temp_path("dgemma_noconfig.gguf");
  convert_hf_to_gguf(model_dir("dgemma_tiny_f32"), path, GgmlType::kF32);
  test::rewrite_gguf_without_key(path, bad, "diffusion-gemma.hf_config_json");
  auto m = Model::load(bad);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find("diffusion-gemma.hf_config_json"), std::string::npos) << m.error();
  std::remove(path.c_str());
  std::remove(bad.c_str());
}

}  // namespace
}  // namespace dllm
