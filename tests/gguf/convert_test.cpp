// dllm convert: the tiny HF models written as GGUF and loaded back. F32 must reproduce gguf-py's file byte
// for byte (same keys, names, order, LLaDA q/k permutation) and give identical logits; quantized types stay
// close.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "convert/gguf_convert.h"
#include "dllm/dllm.h"
#include "gguf_test_util.h"
#include "model/transformer.h"
#include "test_util.h"

namespace dllm {
namespace {

std::vector<float> logits(Model& m, const std::vector<int32_t>& ids) {
  ForwardInput in;
  in.tokens = ids;
  return m.forward(in).value();
}

std::shared_ptr<Model> load(const std::string& path) {
  LoadOptions o;
  o.precision = Precision::kF32;
  auto m = Model::load(path, o);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error());
  return m.ok() ? m.value() : nullptr;
}

const std::vector<int32_t> kIds = {480, 158, 483, 500, 500, 500, 12, 500, 77, 500, 481};

TEST(Convert, F32IsByteIdenticalToGgufPy) {
  for (const char* name : {"llada_tiny_f32", "dream_tiny_gqa_f32"}) {
    const std::string out = test::temp_path(std::string(name) + ".gguf");
    size_t calls = 0;
    const auto r = convert_hf_to_gguf(test::data_path(std::string("oracle/models/") + name), out,
                                      GgmlType::kF32, [&](const ConvertProgress&) { ++calls; });
    EXPECT_EQ(r.fallback_tensors, 0u);
    EXPECT_EQ(calls, r.tensors + 1);
    // gguf-py names the file after its source and so do we; the rest of the bytes must agree exactly.
    EXPECT_TRUE(test::read_file(out) ==
                test::read_file(test::data_path(std::string("gguf/") + name + ".gguf")))
        << name;
    std::remove(out.c_str());
  }
}

TEST(Convert, RoundTripLogits) {
  auto hf = load(test::data_path("oracle/models/llada_tiny_f32"));
  ASSERT_TRUE(hf);
  const auto ref = logits(*hf, kIds);
  const int64_t V = hf->info().vocab_size;
  // Bounds measured on the tiny random model, whose logits amplify weight noise (llama.cpp's own Q8_0 file
  // reaches max|d| 5.4 against the goldens, see tests/data/gguf/README.md): f32 exact, the rest ordered by
  // precision. Rows of 128 are not whole K-quant blocks: q4_k is Q4_0 here (only roughly right), q6_k is F16.
  std::map<std::string, float> errors;
  for (auto [type, max_diff, min_agree] : {std::tuple{"f32", 0.0f, 11},
                                           {"bf16", 0.5f, 10},
                                           {"f16", 0.1f, 11},
                                           {"q8_0", 2.0f, 10},
                                           {"q6_k", 0.1f, 11},
                                           {"q4_k", 20.0f, 4}}) {
    const std::string out = test::temp_path(std::string("rt_") + type + ".gguf");
    convert_hf_to_gguf(test::data_path("oracle/models/llada_tiny_f32"), out, parse_gguf_type(type));
    auto m = load(out);
    std::remove(out.c_str());
    ASSERT_TRUE(m) << type;
    const auto got = logits(*m, kIds);
    ASSERT_EQ(got.size(), ref.size());
    float diff = 0;
    for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::abs(got[i] - ref[i]));
    EXPECT_LE(diff, max_diff) << type;
    errors[type] = diff;
    if (std::string(type) == "f32") {
      EXPECT_EQ(got, ref);
    }
    int agree = 0;
    for (size_t t = 0; t < kIds.size(); ++t)
      agree += std::max_element(got.begin() + t * V, got.begin() + (t + 1) * V) - got.begin() ==
               std::max_element(ref.begin() + t * V, ref.begin() + (t + 1) * V) - ref.begin();
    EXPECT_GE(agree, min_agree) << type;
  }
  EXPECT_LT(errors["f16"], errors["q8_0"]);
  EXPECT_LT(errors["q8_0"], errors["q4_k"]);
}

TEST(Convert, FallbackTypesForRowsThatAreNotWholeBlocks) {
  // The tiny model's rows (128, 384) are not multiples of 256: Q4_K falls back to Q4_0, Q6_K to F16.
  const std::string out = test::temp_path("fallback.gguf");
  const auto r = convert_hf_to_gguf(test::data_path("oracle/models/llada_tiny_f32"), out, GgmlType::kQ4_K);
  EXPECT_EQ(r.fallback_tensors, 2u + 3 * 7);
  ASSERT_EQ(r.fallbacks.size(), r.fallback_tensors);
  // Each named, with its row length and the type written; the mix counts every tensor of the file.
  size_t q4_0 = 0;
  for (const ConvertFallback& fb : r.fallbacks) {
    EXPECT_EQ(fb.wanted, GgmlType::kQ4_K) << fb.tensor;
    EXPECT_EQ(fb.written, GgmlType::kQ4_0) << fb.tensor;
    EXPECT_EQ(fb.cols % 256 != 0, true) << fb.tensor;
    q4_0 += fb.written == GgmlType::kQ4_0;
  }
  EXPECT_EQ(describe_fallback(r.fallbacks.front()),
            r.fallbacks.front().tensor + ": rows of " + std::to_string(r.fallbacks.front().cols) +
                " are not a multiple of Q4_K's 256-element blocks: written as Q4_0");
  size_t total = 0;
  for (const auto& [type, n] : r.tensors_by_type) total += n;
  EXPECT_EQ(total, r.tensors);
  EXPECT_EQ(r.tensors_by_type.at("Q4_0"), q4_0);
  EXPECT_EQ(r.tensors_by_type.count("Q4_K"), 0u) << describe_type_mix(r.tensors_by_type);
  GgufFile f(out);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate.weight")->type, GgmlType::kQ4_0);
  EXPECT_EQ(f.find_tensor("output_norm.weight")->type, GgmlType::kF32);
  EXPECT_EQ(f.get_uint("general.file_type"), 15u);
  std::remove(out.c_str());
}

// The Q4_0 matrices of that file (the rows that fell back from Q4_K) are packed into 16-row panels, not
// requantised to 8 bits, and stay close to the file dequantised to f32 at load.
TEST(Convert, Q4_0MatricesRunInPlace) {
  const std::string out = test::temp_path("q4_0_in_place.gguf");
  convert_hf_to_gguf(test::data_path("oracle/models/llada_tiny_f32"), out, GgmlType::kQ4_K);
  LoadOptions o;
  o.precision = Precision::kF32;
  auto in_place = Model::load(out, o);
  o.weights = WeightFormat::kDequantize;
  auto dequantised = Model::load(out, o);
  ASSERT_TRUE(in_place.ok() && dequantised.ok());
  const auto* t = dynamic_cast<const Transformer*>(in_place.value().get());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->ggml_type_name(), "Q4_0");
  // q, k, v, o, gate, up, down of 3 layers and the head (q and k moved back from llama.cpp's pair order).
  EXPECT_EQ(t->packed_matrices(), 3 * 7 + 1);
  EXPECT_EQ(t->q8_matrices(), 0);
  const auto a = logits(*in_place.value(), kIds), b = logits(*dequantised.value(), kIds);
  ASSERT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  EXPECT_LT(std::sqrt(num / den), 0.05);  // 8-bit activations against f32 ones
  std::remove(out.c_str());
}

// The trained demo model with its byte-level BPE tokenizer.json: identical logits, and the vocabulary in the
// GGUF.
TEST(Convert, DemoModelWithTokenizer) {
  const std::string dir = std::string(DLLM_SOURCE_DIR) + "/models/demo";
  if (!std::filesystem::exists(dir + "/model.safetensors")) GTEST_SKIP() << dir << " is not present";
  const std::string out = test::temp_path("demo.gguf");
  convert_hf_to_gguf(dir, out, GgmlType::kF32);
  auto hf = load(dir);
  auto gg = load(out);
  ASSERT_TRUE(hf && gg);
  const std::vector<int32_t> ids = {10, 20, 30, 4092, 4092, 4092, 40, 4092, 50};
  EXPECT_EQ(logits(*hf, ids), logits(*gg, ids));
  EXPECT_EQ(hf->info().mask_id, gg->info().mask_id);
  EXPECT_EQ(hf->info().eos_id, gg->info().eos_id);
  GgufFile f(out);
  const auto tok = read_gguf_tokenizer(f);
  ASSERT_TRUE(tok);
  const auto json = test::read_json(dir + "/tokenizer.json");
  EXPECT_EQ(tok->model, "gpt2");
  EXPECT_EQ(tok->merges.size(), json["model"]["merges"].size());
  for (auto it = json["model"]["vocab"].begin(); it != json["model"]["vocab"].end(); ++it) {
    const int64_t id = it.value().get<int64_t>();
    ASSERT_EQ(tok->tokens.at(static_cast<size_t>(id)), it.key());
    ASSERT_EQ(tok->token_types.at(static_cast<size_t>(id)), GgufTokenizer::kNormal);
  }
  for (const auto& a : json["added_tokens"])
    EXPECT_EQ(tok->tokens.at(a["id"].get<size_t>()), a["content"].get<std::string>());
  EXPECT_EQ(tok->mask_id, gg->info().mask_id);
  std::remove(out.c_str());
}

TEST(Convert, Errors) {
  EXPECT_THROW(parse_gguf_type("q5_k"), Error);
  EXPECT_EQ(parse_gguf_type("Q8_0"), GgmlType::kQ8_0);
  EXPECT_THROW(convert_hf_to_gguf(test::data_path("oracle/models/nonexistent"), test::temp_path("x.gguf"),
                                  GgmlType::kF32),
               Error);
  try {
    convert_hf_to_gguf(test::data_path("oracle/models/llada_tiny_f32"), "/nonexistent_dir/x.gguf",
                       GgmlType::kF32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent_dir/x.gguf"), std::string::npos);
  }
}

}  // namespace
}  // namespace dllm
