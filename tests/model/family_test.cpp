// The family descriptions (model/family.h) and what they drive: the parameter count from the tensor table,
// the precision "auto" keeps, and random models built from the same table.
#include "model/family.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "kernels/linear.h"
#include "model/diffusion_gemma.h"
#include "model/random_model.h"
#include "model/transformer.h"
#include "test_util.h"

namespace dllm {
namespace {

const char* const kModels[] = {"oracle/models/llada_tiny_f32", "oracle/models/dream_tiny_gqa_f32",
                               "oracle/models/llada2_tiny_f32", "oracle/models/sdar_tiny_f32",
                               "oracle/models/sdar_moe_tiny_f32"};

TEST(Family, EveryTableIsWhole) {
  ASSERT_GE(families().size(), 2u);
  for (const Family* f : families()) {
    SCOPED_TRACE(f->name);
    EXPECT_EQ(find_family(f->name), f);
    for (TensorRole role :
         {TensorRole::kEmbedding, TensorRole::kOutputNorm, TensorRole::kHead, TensorRole::kAttnNorm,
          TensorRole::kAttnOut, TensorRole::kFfnNorm, TensorRole::kGate, TensorRole::kUp, TensorRole::kDown})
      EXPECT_NO_THROW(find_spec(*f, role)) << "role " << static_cast<int>(role);
    // q, k and v either separate or fused, not both.
    auto has = [&](TensorRole role) {
      return std::any_of(f->tensors.begin(), f->tensors.end(),
                         [&](const TensorSpec& s) { return s.role == role; });
    };
    EXPECT_NE(has(TensorRole::kQKV), has(TensorRole::kQ) && has(TensorRole::kK) && has(TensorRole::kV));
    // A mixture-of-experts table is whole too.
    if (has(TensorRole::kRouter)) {
      for (TensorRole role : {TensorRole::kExpertGate, TensorRole::kExpertUp, TensorRole::kExpertDown})
        EXPECT_TRUE(has(role)) << "role " << static_cast<int>(role);
    }
    std::set<std::string> hf, gguf;
    for (const TensorSpec& s : f->tensors) {
      EXPECT_TRUE(hf.insert(s.hf).second) << "HF name twice: " << s.hf;
      EXPECT_TRUE(gguf.insert(s.gguf).second) << "GGUF name twice: " << s.gguf;
      // A per-layer tensor names its layer; a whole-model one does not.
      EXPECT_EQ(is_per_layer(s.role), s.hf.find("{}") != std::string::npos) << s.hf;
      EXPECT_EQ(is_per_layer(s.role), s.gguf.find("{}") != std::string::npos) << s.gguf;
      // Experts are one tensor each in HF ("{e}"), one stacked tensor per layer in GGUF.
      EXPECT_EQ(is_expert(s.role), s.hf.find("{e}") != std::string::npos) << s.hf;
      EXPECT_EQ(s.gguf.find("{e}"), std::string::npos) << s.gguf;
    }
  }
}

TEST(Family, ParameterCountIsEveryStoredElement) {
  int checked = 0;
  for (const char* rel : kModels) {
    SCOPED_TRACE(rel);
    SafetensorsFile st(test::data_path(std::string(rel) + "/model.safetensors"));
    int64_t stored = 0;
    for (const auto& [name, t] : st.tensors()) stored += t.numel();
    auto m = Model::load(test::data_path(rel));
    ASSERT_TRUE(m.ok()) << m.error();
    EXPECT_EQ(m.value()->info().n_params, stored);
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(Family, AutoPrecisionKeepsTheCheckpoints) {
  // f32 files stay f32 (the exact path) by default...
  for (const char* rel : kModels) {
    auto m = Model::load(test::data_path(rel));
    ASSERT_TRUE(m.ok()) << m.error();
    EXPECT_EQ(m.value()->info().precision, Precision::kF32) << rel;
    EXPECT_NE(m.value()->info().precision_reason.find("auto"), std::string::npos);
    EXPECT_NE(m.value()->info().precision_reason.find("F32"), std::string::npos);
  }
  // ... an f16 file stays f16, not rounded to bf16, and says so per stored type ...
  auto f16 = Model::load(test::data_path("gguf/llada_tiny_f16.gguf"));
  ASSERT_TRUE(f16.ok()) << f16.error();
  EXPECT_EQ(f16.value()->info().precision, Precision::kF16);
  EXPECT_NE(f16.value()->info().precision_reason.find("F16"), std::string::npos)
      << f16.value()->info().precision_reason;
  const auto& by_type = f16.value()->info().precision_by_type;
  ASSERT_TRUE(by_type.count("F16")) << by_type.size();
  EXPECT_EQ(by_type.at("F16"), "f16");
  // ... and a request forces any, saying so: the same f16 file as bf16, an f32 one as bf16 or f16.
  LoadOptions o;
  o.precision = Precision::kBF16;
  auto as_bf16 = Model::load(test::data_path("gguf/llada_tiny_f16.gguf"), o);
  ASSERT_TRUE(as_bf16.ok()) << as_bf16.error();
  EXPECT_EQ(as_bf16.value()->info().precision, Precision::kBF16);
  const std::string bf16_kind = bf16_matmul_supported() ? "bf16" : "bf16 weights, f32 products";
  EXPECT_EQ(as_bf16.value()->info().precision_by_type.at("F16"), bf16_kind);
  auto forced = Model::load(test::data_path(kModels[0]), o);
  ASSERT_TRUE(forced.ok()) << forced.error();
  EXPECT_EQ(forced.value()->info().precision, Precision::kBF16);
  EXPECT_NE(forced.value()->info().precision_reason.find("requested"), std::string::npos);
  EXPECT_EQ(forced.value()->info().precision_by_type.at("F32"), bf16_kind);
  o.precision = Precision::kF16;
  auto forced_f16 = Model::load(test::data_path(kModels[0]), o);
  ASSERT_TRUE(forced_f16.ok()) << forced_f16.error();
  EXPECT_EQ(forced_f16.value()->info().precision, Precision::kF16);
  EXPECT_EQ(forced_f16.value()->info().precision_by_type.at("F32"), "f16");
}

TEST(Family, DefaultLoadGivesTheExactLogits) {
  // The default (auto) on an f32 checkpoint is the f32 path bit for bit: the golden tests' tokens without
  // --dtype.
  LoadOptions exact;
  exact.precision = Precision::kF32;
  auto a = Model::load(test::data_path(kModels[0]));
  auto b = Model::load(test::data_path(kModels[0]), exact);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<int32_t> ids = {480, 158, 483, 500, 12};
  ForwardInput in;
  in.tokens = ids;
  EXPECT_EQ(a.value()->forward(in).value(), b.value()->forward(in).value());
}

TEST(Family, RandomModelsFollowTheTable) {
  // A random model of a known shape has every tensor of its family's table (Dream's q/k/v biases included).
  for (const char* shape : {"llada-tiny", "llada-moe-tiny"}) {
    auto m = make_random_model(find_shape(shape), 0, Precision::kF32, 1);
    const Family* f = find_family(m->info().architecture);
    ASSERT_NE(f, nullptr);
    EXPECT_GT(m->info().n_params, 0);
    const std::vector<int32_t> ids = {1, 2, 3};
    ForwardInput in;
    in.tokens = ids;
    EXPECT_TRUE(m->forward(in).ok());
  }
  // Every shape's config.json parses with its family's parser (the real sizes: 20 or 48 layers, 128-256
  // experts).
  int parsed = 0;
  for (const auto& s : known_shapes()) {
    if (s.family == "diffusion_gemma") {  // not the shared Transformer: its own parser
      const Checkpoint described("shape " + s.name, nlohmann::json::parse(s.config),
                                 nlohmann::json::object());
      EXPECT_GT(parse_diffusion_gemma_config(described).info.n_layers, 0) << s.name;
      ++parsed;
      continue;
    }
    const Family* f = find_family(s.family);
    ASSERT_NE(f, nullptr) << s.name;
    const Checkpoint described("shape " + s.name, nlohmann::json::parse(s.config), nlohmann::json::object());
    const TransformerConfig c = f->parse_hf_config(described);
    EXPECT_GT(c.info.n_layers, 0) << s.name;
    if (s.name == "sdar-30b-a3b") {
      EXPECT_EQ(c.moe.experts, 128);
      EXPECT_EQ(c.moe.used, 8);
      EXPECT_EQ(c.moe.gating, TransformerConfig::Moe::Gating::kSoftmax);
      EXPECT_TRUE(c.moe.normalize);
      EXPECT_EQ(c.moe.first_dense_layers, 0);
    }
    if (s.name == "llada2-mini") {
      EXPECT_EQ(c.moe.experts, 256);
    }
    if (s.name == "llada-moe-7b-a1b") {  // every layer MoE, softmax top-8 of 64, not renormalised
      EXPECT_EQ(c.info.head_dim, 128);
      EXPECT_EQ(c.moe.experts, 64);
      EXPECT_EQ(c.moe.used, 8);
      EXPECT_EQ(c.moe.expert_ffn, 1024);
      EXPECT_EQ(c.moe.gating, TransformerConfig::Moe::Gating::kSoftmax);
      EXPECT_FALSE(c.moe.normalize);
      EXPECT_EQ(c.moe.first_dense_layers, 0);
      EXPECT_TRUE(c.qk_norm);
      // 7B parameters in all (two 157184 x 2048 tables, 16 layers of 64 experts).
      const int64_t params = count_params(*f, c);
      EXPECT_GT(params, 7'000'000'000);
      EXPECT_LT(params, 7'500'000'000);
    }
    ++parsed;
  }
  EXPECT_GE(parsed, 11);
}

}  // namespace
}  // namespace dllm
