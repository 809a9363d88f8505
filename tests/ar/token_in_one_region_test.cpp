// A generated token's forward in one parallel region (Transformer::run_token: matmuls split into the threads'
// shares, spin barriers between the steps) against the same forward run step by step, one region each: the
// same logits bit for bit, on 2 and 3 threads, for the tiny qwen2 (q/k/v biases), qwen3 (q/k norms) and llama
// models converted to Q8_0 and Q4_0 GGUF files (every matrix then in packed panels, which the path needs) and
// to F16: run as f16 (gemv_f16's blocked layout on AVX-512 CPUs, gemm_small_m on the rows elsewhere) and as
// bf16 (the bf16 gemv kernel's layout, on AVX512_BF16 CPUs).
// Each step is 1 token, and one is 3 (a speculative verification's rows).
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ar/ar_session.h"
#include "convert/gguf_convert.h"
#include "dllm/dllm.h"
#include "kernels/gemv_bf16.h"
#include "model/transformer.h"
#include "test_util.h"

namespace dllm {
namespace {

std::string quantized(const std::string& name, GgmlType type) {
  const auto out = std::filesystem::temp_directory_path() /
                   ("dllm_token_region_" + name + "_" + std::to_string(static_cast<int>(type)) + ".gguf");
  if (!std::filesystem::exists(out))
    convert_hf_to_gguf(test::data_path("oracle/ar/models/" + name), out.string(), type);
  return out.string();
}

// The logits of a prompt, then 6 greedy tokens one at a time, then 3 tokens at once.
std::vector<std::vector<float>> decode(Model& model) {
  std::vector<std::vector<float>> steps;
  ArSession session(model);
  const std::vector<int32_t> prompt = {5, 17, 42, 99, 7};
  steps.push_back(session.advance(prompt));
  for (int i = 0; i < 6; ++i) {
    const std::vector<float>& last = steps.back();
    const auto token = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    steps.push_back(session.advance(std::span<const int32_t>(&token, 1)));
  }
  const std::vector<int32_t> three = {11, 12, 13};
  steps.push_back(session.advance(three, 3));
  return steps;
}

// Every matrix must be able to run its share: packed panels (Q8_0, Q4_0), or for F16 files the bf16 gemv
// kernel's layout (AVX512_BF16 CPUs), which the background preparation reorders the weights into.
int compare_paths(const std::vector<GgmlType>& types, Precision precision = Precision::kAuto) {
  const int saved = omp_get_max_threads();
  int compared = 0;
  for (const std::string name : {"qwen2_tiny", "qwen3_tiny", "llama3_tiny"})
    for (GgmlType type : types) {
      LoadOptions options;
      options.precision = precision;
      auto loaded = Model::load(quantized(name, type), options);
      EXPECT_TRUE(loaded.ok()) << loaded.error();
      if (!loaded.ok()) return compared;
      auto* transformer = dynamic_cast<Transformer*>(loaded.value().get());
      EXPECT_NE(transformer, nullptr);
      if (!transformer) return compared;
      if (type == GgmlType::kF16) {
        for (int i = 0; i < 1000 && transformer->weights_prepared() < 1.0; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
      } else {
        EXPECT_EQ(transformer->packed_matrices(), transformer->matrices()) << name;
      }
      for (int threads : {2, 3}) {
        omp_set_num_threads(threads);
        transformer->set_token_in_one_region(false);
        const int64_t before = transformer->forwards_in_one_region();
        const auto want = decode(*transformer);
        EXPECT_EQ(transformer->forwards_in_one_region(), before);
        transformer->set_token_in_one_region(true);
        const auto got = decode(*transformer);
        // The prompt (5 rows) runs step by step; the 6 single tokens and the 3 rows in one region.
        EXPECT_EQ(transformer->forwards_in_one_region(), before + 7) << name;
        EXPECT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
          EXPECT_EQ(got[i], want[i]) << name << " type " << static_cast<int>(type) << ", " << threads
                                     << " threads, step " << i;
          ++compared;
        }
      }
    }
  omp_set_num_threads(saved);
  return compared;
}

TEST(TokenInOneRegion, SameLogitsAsOneRegionPerStep) {
  EXPECT_EQ(compare_paths({GgmlType::kQ8_0, GgmlType::kQ4_0}), 3 * 2 * 2 * 8);
}

TEST(TokenInOneRegion, SameLogitsOnF16Weights) {
  EXPECT_EQ(compare_paths({GgmlType::kF16}), 3 * 2 * 8);
}

TEST(TokenInOneRegion, SameLogitsOnBf16Weights) {
  if (!gemv_bf16_blocked_supported())
    GTEST_SKIP() << "this CPU has no AVX512_BF16: bf16 weights run their few rows on oneDNN, not in one region";
  EXPECT_EQ(compare_paths({GgmlType::kF16}, Precision::kBF16), 3 * 2 * 8);
}

}  // namespace
}  // namespace dllm
