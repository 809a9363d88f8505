// GGUF Q8_0 and Q4_K models on the Vulkan backend: the device holds the blocks as stored (dequantised in the
// shaders, not expanded to f32 at load), and its logits are the CPU's on the same blocks dequantised to f32
// (WeightFormat::kDequantize), up to f32 sums in another order. The files are the shipped demo model
// converted here (tests must not depend on fixtures they can make).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "convert/gguf_convert.h"
#include "dllm/dllm.h"
#include "model/transformer.h"
#include "vulkan_test_util.h"

namespace dllm {
namespace {

std::string converted(GgmlType type, const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("dllm_vk_quant_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  const ConvertResult r = convert_hf_to_gguf(std::string(DLLM_SOURCE_DIR) + "/models/demo", path, type);
  EXPECT_EQ(r.fallback_tensors, 0u) << "every matrix of the demo model is whole blocks";
  return path;
}

std::shared_ptr<Model> load(const std::string& path, BackendKind backend, WeightFormat weights) {
  LoadOptions o;
  o.precision = Precision::kF32;
  o.backend = backend;
  o.weights = weights;
  return Model::load(path, o).value();
}

TEST(VulkanQuantized, BlocksStayBlocksAndTheLogitsAreTheDequantisedCpus) {
  NEED_DEVICE();
  int checked = 0;
  // The device's bytes per stored byte: Q8_0's 34-byte blocks held as 32 + 4 (an f32 scale), Q4_K's 144-byte
  // super-blocks as 128 + 8 x 8 (each sub-block's scale and min in f32). Expanded to f32 they would be 3.8
  // / 7.1.
  for (auto [type, name, held_per_stored] : {std::tuple{GgmlType::kQ8_0, "demo_q8_0.gguf", 36.0 / 34},
                                             std::tuple{GgmlType::kQ4_K, "demo_q4_k.gguf", 192.0 / 144}}) {
    SCOPED_TRACE(name);
    const std::string path = converted(type, name);
    auto cpu = load(path, BackendKind::kCpu, WeightFormat::kDequantize);
    auto gpu = load(path, BackendKind::kVulkan, WeightFormat::kAuto);
    auto* t = dynamic_cast<Transformer*>(gpu.get());
    ASSERT_NE(t, nullptr);
    const double stored = static_cast<double>(t->matrix_bytes());        // the head and the layers' matrices
    const double held = static_cast<double>(t->backend().held_bytes());  // those, and the f32 norm vectors
    EXPECT_NEAR(held / stored, held_per_stored, 0.02) << held << " bytes held for " << stored << " stored";

    const std::vector<int32_t> tokens = {100, 7, 4095, 4095, 4095, 33, 4095, 12, 900, 4095};
    ForwardInput in;
    in.tokens = tokens;
    const std::vector<float> want = cpu->forward(in).value();
    const std::vector<float> got = gpu->forward(in).value();
    ASSERT_EQ(got.size(), want.size());
    float worst = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::abs(got[i] - want[i]));
      scale = std::max(scale, std::abs(want[i]));
    }
    EXPECT_LT(worst, 2e-5f * (1 + scale)) << "largest logit " << scale;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

}  // namespace
}  // namespace dllm
