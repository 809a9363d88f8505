// 8-bit weights in the forward pass (LoadOptions::weights, docs/gguf.md): the Q8_0 fixtures run with 8-bit
// weights against the same files dequantised to f32, F32 files quantised at load against the Q8_0 files
// gguf-py wrote, weight memory, determinism (runs, thread counts, generation), and the option's errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "dllm/dllm.h"
#include "gguf_test_util.h"
#include "kernels/quant/quant.h"
#include "model/transformer.h"
#include "test_util.h"

namespace dllm {
namespace {

std::shared_ptr<Model> load(const std::string& path, WeightFormat wf) {
  LoadOptions o;
  o.precision = Precision::kF32;
  o.weights = wf;
  auto m = Model::load(path, o);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error());
  return m.ok() ? m.value() : nullptr;
}
std::shared_ptr<Model> load_data(const std::string& rel, WeightFormat wf) {
  return load(test::data_path(rel), wf);
}

const Transformer& tf(const std::shared_ptr<Model>& m) {
  return dynamic_cast<const Transformer&>(*m);
}

std::vector<float> logits(Model& m, const std::vector<int32_t>& ids) {
  ForwardInput in;
  in.tokens = ids;
  return m.forward(in).value();
}

std::vector<std::vector<int32_t>> forward_ids(const std::string& family) {
  std::vector<std::vector<int32_t>> out;
  const auto golden = test::read_json(test::data_path("oracle/golden/" + family + "/forward.json"));
  for (const auto& s : golden["sequences"]) out.push_back(s["input_ids"].get<std::vector<int32_t>>());
  return out;
}

struct Diff {
  double rel_rms = 0;  // ||a - b|| / ||b||
  double max_abs = 0;
  double top1 = 0;  // fraction of positions with the same argmax
};
Diff compare(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
  Diff d;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
    d.max_abs = std::max(d.max_abs, double(std::abs(a[i] - b[i])));
  }
  d.rel_rms = std::sqrt(num / den);
  const int64_t n = static_cast<int64_t>(a.size()) / vocab;
  int agree = 0;
  for (int64_t t = 0; t < n; ++t)
    agree += std::max_element(a.begin() + t * vocab, a.begin() + (t + 1) * vocab) - a.begin() ==
             std::max_element(b.begin() + t * vocab, b.begin() + (t + 1) * vocab) - b.begin();
  d.top1 = double(agree) / n;
  return d;
}

struct Fixture {
  const char* q8_file;
  const char* f32_file;
  const char* family;
};
const Fixture kFixtures[] = {
    {"gguf/llada_tiny_q8_0.gguf", "gguf/llada_tiny_f32.gguf", "llada_tiny_f32"},
    {"gguf/dream_tiny_gqa_q8_0.gguf", "gguf/dream_tiny_gqa_f32.gguf", "dream_tiny_gqa_f32"}};

// The only difference between the two paths is the 8-bit rounding of the activations (per block of 32, as
// llama.cpp's q8_0 x q8_0 dot product): each matmul input is off by at most half a step, amax/254 per block.
// These tiny random models amplify any rounding (their logits move by up to 5.4 between F32 and Q8_0
// *weights*), so the bound is relative to that: the activation rounding must cost less than the weight
// rounding the file already has (relative RMS of the logits vs the F32 file's), and stay under 5% RMS with
// the same top-1 on >= 90% of positions. Measured: 2.6-3.4% RMS for the activations vs 3.4-5.9% for the Q8_0
// weights.
TEST(GgufQ8Weights, Q8_0FilesRunIn8BitsCloseToDequantised) {
  for (const auto& fx : kFixtures) {
    auto q8 = load_data(fx.q8_file, WeightFormat::kQ8);
    auto dq = load_data(fx.q8_file, WeightFormat::kDequantize);
    auto f32 = load_data(fx.f32_file, WeightFormat::kAuto);
    ASSERT_TRUE(q8 && dq && f32);
    const int64_t V = q8->info().vocab_size;
    for (const auto& ids : forward_ids(fx.family)) {
      const auto ldq = logits(*dq, ids);
      const Diff act = compare(logits(*q8, ids), ldq, V), wts = compare(ldq, logits(*f32, ids), V);
      std::printf(
          "[ q8 weights ] %s len %zu: 8-bit activations rel RMS %.4f (max |diff| %.3f, top-1 %.3f); "
          "Q8_0 weights vs F32 rel RMS %.4f (max |diff| %.3f)\n",
          fx.q8_file, ids.size(), act.rel_rms, act.max_abs, act.top1, wts.rel_rms, wts.max_abs);
      EXPECT_LT(act.rel_rms, wts.rel_rms) << fx.q8_file;
      EXPECT_LT(act.rel_rms, 0.05) << fx.q8_file;
      EXPECT_GE(act.top1, 0.9) << fx.q8_file;
    }
  }
}

// gguf-py's Q8_0 and our quantiser give the same blocks, and LLaDA's permuted q/k rows move whole: an F32
// file quantised at load must hold exactly the weights of the Q8_0 file, so the logits are identical.
TEST(GgufQ8Weights, F32FileQuantisedAtLoadEqualsQ8_0File) {
  for (const auto& fx : kFixtures) {
    auto from_f32 = load_data(fx.f32_file, WeightFormat::kQ8);
    auto from_q8 = load_data(fx.q8_file, WeightFormat::kQ8);
    ASSERT_TRUE(from_f32 && from_q8);
    for (const auto& ids : forward_ids(fx.family))
      EXPECT_EQ(logits(*from_f32, ids), logits(*from_q8, ids)) << fx.f32_file;
  }
}

// A Q8_0 file by default: every matrix packed into 16-row panels (LinearPacked: the file's blocks re-ordered,
// 1 + 2/32 bytes a weight); with --weights q8 every matrix in LinearQ8 (f32 scales: 1 + 4/32 bytes).
TEST(GgufQ8Weights, WeightMemoryIs8Bit) {
  for (const auto& fx : kFixtures) {
    auto packed = load_data(fx.q8_file, WeightFormat::kAuto);  // quantized file: packed 8-bit by default
    auto q8 = load_data(fx.q8_file, WeightFormat::kQ8);
    auto dq = load_data(fx.q8_file, WeightFormat::kDequantize);
    auto f32 = load_data(fx.f32_file, WeightFormat::kAuto);  // plain file: as before
    ASSERT_TRUE(packed && q8 && dq && f32);
    EXPECT_EQ(tf(packed).packed_matrices(), tf(packed).matrices());
    EXPECT_EQ(tf(q8).q8_matrices(), tf(q8).matrices());
    EXPECT_EQ(tf(dq).q8_matrices() + tf(dq).packed_matrices(), 0);
    EXPECT_EQ(tf(f32).q8_matrices() + tf(f32).packed_matrices(), 0);
    const ModelInfo& m = q8->info();
    // Every matrix parameter (and the embedding, shared with a tied head), plus f32 vectors.
    const int64_t vectors =
        m.d_model * (2 * m.n_layers + 1) +
        (m.architecture == "dream" ? m.n_layers * (m.n_heads + 2 * m.n_kv_heads) * m.head_dim : 0);
    EXPECT_EQ(tf(packed).weight_bytes(), static_cast<size_t>((m.n_params - vectors) * 17 / 16 + vectors * 4));
    EXPECT_EQ(tf(q8).weight_bytes(), static_cast<size_t>((m.n_params - vectors) * 9 / 8 + vectors * 4));
    EXPECT_LT(tf(packed).weight_bytes() * 10, tf(dq).weight_bytes() * 3) << "8-bit must be < 30% of f32";
    std::printf("[ q8 weights ] %s: %zu bytes packed, %zu in LinearQ8, %zu dequantised to f32\n", fx.q8_file,
                tf(packed).weight_bytes(), tf(q8).weight_bytes(), tf(dq).weight_bytes());
  }
}

// A tied head (no output.weight): the 8-bit token_embd is the embedding table and the head, one copy.
TEST(GgufQ8Weights, TiedHeadSharesThe8BitEmbedding) {
  const std::string path = test::temp_path("llada_q8_0_tied.gguf");
  test::rewrite_gguf(test::data_path("gguf/llada_tiny_q8_0.gguf"), path,
                     [](GgufWriter&, std::vector<test::TensorCopy>& ts) {
                       std::erase_if(ts, [](const test::TensorCopy& t) { return t.name == "output.weight"; });
                     });
  auto tied = load(path, WeightFormat::kQ8);
  auto tied_dq = load(path, WeightFormat::kDequantize);
  auto untied = load_data("gguf/llada_tiny_q8_0.gguf", WeightFormat::kQ8);
  std::filesystem::remove(path);
  ASSERT_TRUE(tied && tied_dq && untied);
  const ModelInfo& m = tied->info();
  EXPECT_EQ(tf(tied).q8_matrices(), tf(tied).matrices());
  EXPECT_EQ(tf(untied).weight_bytes() - tf(tied).weight_bytes(),
            static_cast<size_t>(m.vocab_size * m.d_model * 9 / 8));
  for (const auto& ids : forward_ids("llada_tiny_f32")) {
    const Diff d = compare(logits(*tied, ids), logits(*tied_dq, ids), m.vocab_size);
    EXPECT_LT(d.rel_rms, 0.05);
    EXPECT_GE(d.top1, 0.9);
  }
}

// Each output element is computed by one thread in a fixed order: the same bits for any thread count and run.
TEST(GgufQ8Weights, DeterministicAcrossRunsAndThreads) {
  auto q8 = load_data("gguf/llada_tiny_q8_0.gguf", WeightFormat::kQ8);
  ASSERT_TRUE(q8);
  const auto ids = forward_ids("llada_tiny_f32").front();
  const int threads = omp_get_max_threads();
  const auto a = logits(*q8, ids);
  EXPECT_EQ(logits(*q8, ids), a);
  omp_set_num_threads(1);
  const auto one = logits(*q8, ids);
  omp_set_num_threads(3);
  const auto three = logits(*q8, ids);
  omp_set_num_threads(threads);
  EXPECT_EQ(one, a);
  EXPECT_EQ(three, a);
}

TEST(GgufQ8Weights, GenerationIsDeterministic) {
  for (const auto& fx : kFixtures) {
    auto q8 = load_data(fx.q8_file, WeightFormat::kQ8);
    ASSERT_TRUE(q8);
    GenerateParams p;
    p.gen_length = 8;
    p.block_length = 8;
    p.steps = 4;
    const std::vector<std::vector<int32_t>> prompts = {{5, 17, 42, 99, 7}, {3, 8, 11, 60, 2}};
    auto r1 = generate(*q8, prompts, p);
    auto r2 = generate(*q8, prompts, p);
    ASSERT_TRUE(r1.ok() && r2.ok());
    EXPECT_EQ(r1->outputs, r2->outputs) << fx.q8_file;
    ASSERT_EQ(r1->outputs.size(), 2u);
    EXPECT_EQ(r1->outputs[0].size(), 8u);
  }
}

// A Q4_0 file: every matrix packed into 16-row panels (LinearPacked; LLaDA's q and k rows are moved back from
// llama.cpp's pair order first, blocks and all), no requantisation; the products stay far closer to the
// dequantised file than 4-bit weights are to the F32 file.
TEST(GgufQ8Weights, Q4_0FileInPlaceOrRequantisedTo8Bits) {
  const std::string path = test::temp_path("llada_q4_0.gguf");
  int rewritten = 0;
  test::rewrite_gguf(
      test::data_path("gguf/llada_tiny_f32.gguf"), path, [&](GgufWriter&, std::vector<test::TensorCopy>& ts) {
        for (auto& t : ts) {
          if (t.dims.size() != 2) continue;
          ++rewritten;
          const int64_t n = t.dims[0] * t.dims[1];
          std::vector<float> f(static_cast<size_t>(n));
          std::memcpy(f.data(), t.bytes.data(), f.size() * sizeof(float));
          t.type = GgmlType::kQ4_0;
          t.bytes.assign(ggml_row_bytes(GgmlType::kQ4_0, t.dims[0]) * static_cast<size_t>(t.dims[1]), 0);
          quant::quantize(GgmlType::kQ4_0, f.data(), t.bytes.data(), n);
        }
      });
  EXPECT_GT(rewritten, 0);  // the 2-D weights were rewritten
  auto q8 = load(path, WeightFormat::kAuto);
  auto dq = load(path, WeightFormat::kDequantize);
  auto f32 = load_data("gguf/llada_tiny_f32.gguf", WeightFormat::kAuto);
  std::filesystem::remove(path);
  ASSERT_TRUE(q8 && dq && f32);
  EXPECT_EQ(tf(q8).ggml_type_name(), "Q4_0");
  EXPECT_EQ(tf(q8).q8_matrices(), 0);
  EXPECT_EQ(tf(q8).packed_matrices(), tf(q8).matrices());
  for (const auto& ids : forward_ids("llada_tiny_f32")) {
    const auto ldq = logits(*dq, ids);
    const Diff d = compare(logits(*q8, ids), ldq, q8->info().vocab_size);
    const Diff wts = compare(ldq, logits(*f32, ids), q8->info().vocab_size);
    std::printf(
        "[ q8 weights ] Q4_0 in place / -> Q8_0 len %zu: rel RMS %.4f (max |diff| %.3f, top-1 %.3f); Q4_0 "
        "weights vs "
        "F32 rel RMS %.4f\n",
        ids.size(), d.rel_rms, d.max_abs, d.top1, wts.rel_rms);
    // Requantising 4-bit values to 8 bits adds at most half an 8-bit step per weight, on top of the
    // activations: still well under what 4-bit weights cost.
    EXPECT_LT(d.rel_rms, 0.5 * wts.rel_rms);
    EXPECT_GE(d.top1, 0.75);
  }
}

TEST(GgufQ8Weights, Q8NeedsAGgufFile) {
  LoadOptions o;
  o.weights = WeightFormat::kQ8;
  auto m = Model::load(test::data_path("oracle/models/llada_tiny_f32"), o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find("need a GGUF file"), std::string::npos) << m.error();
  o.weights = WeightFormat::kAuto;  // a directory loads as before
  EXPECT_TRUE(Model::load(test::data_path("oracle/models/llada_tiny_f32"), o).ok());
}

}  // namespace
}  // namespace dllm
