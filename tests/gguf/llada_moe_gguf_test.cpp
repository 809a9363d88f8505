// LLaDA-MoE GGUF (llama.cpp's llada-moe architecture): `dllm convert` of the tiny Hugging Face directory
// writes llama.cpp's file (tests/data/oracle/ar/gguf/llada_moe_tiny_f32.gguf, made the way its
// convert_hf_to_gguf.py makes it): the same tensors byte for byte and the same values under every key of that
// file, plus the MoE keys this engine writes for every family. Both load as the directory, to the bit.
// llama.cpp's file has no expert_gating_func / expert_weights_norm (its graph hard-codes them for llada-moe):
// the family supplies softmax, not renormalised; a file that gives the keys is read as it says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "convert/gguf_convert.h"
#include "dllm/dllm.h"
#include "gguf_test_util.h"
#include "io/gguf.h"
#include "test_util.h"

namespace dllm {
namespace {

const std::string kHf = "oracle/ar/models/llada_moe_tiny";
const std::string kLlamaCpp = "oracle/ar/gguf/llada_moe_tiny_f32.gguf";

std::shared_ptr<Model> load(const std::string& path) {
  LoadOptions o;
  o.precision = Precision::kF32;
  auto m = Model::load(path, o);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error());
  return m.ok() ? m.value() : nullptr;
}

// Converted once per type; removed at exit.
std::string converted(GgmlType type) {
  static std::map<GgmlType, std::string> done;
  auto& path = done[type];
  if (path.empty()) {
    path = test::temp_path("llada_moe_tiny_" + std::to_string(static_cast<int>(type)) + ".gguf");
    convert_hf_to_gguf(test::data_path(kHf), path, type);
    static struct Cleanup {
      std::map<GgmlType, std::string>* files;
      ~Cleanup() {
        for (const auto& [t, p] : *files) std::remove(p.c_str());
      }
    } cleanup{&done};
  }
  return path;
}

std::vector<std::vector<int32_t>> golden_sequences() {
  std::vector<std::vector<int32_t>> out;
  const auto g = test::read_json(test::data_path("oracle/ar/golden/llada_moe_tiny/forward.json"));
  for (const auto& s : g["sequences"]) out.push_back(s["input_ids"].get<std::vector<int32_t>>());
  return out;
}

std::vector<float> logits(Model& m, const std::vector<int32_t>& ids) {
  ForwardInput in;
  in.tokens = ids;
  return m.forward(in).value();
}

bool same_value(const GgufValue& a, const GgufValue& b) {
  return a.type == b.type && a.elem_type == b.elem_type && a.scalar == b.scalar && a.array == b.array;
}

TEST(LladaMoeGguf, ConvertWritesLlamaCppsFile) {
  const GgufFile ours(converted(GgmlType::kF32)), theirs(test::data_path(kLlamaCpp));
  EXPECT_EQ(ours.get_string("general.architecture"), "llada-moe");
  int keys = 0;
  for (const auto& key : theirs.metadata_order()) {
    if (key == "general.name" || key == "general.size_label") continue;  // named after the source directory
    ASSERT_TRUE(ours.has(key)) << key;
    EXPECT_TRUE(same_value(ours.get(key), theirs.get(key))) << key;
    ++keys;
  }
  EXPECT_GE(keys, 25);
  // The router as llama.cpp's llada-moe graph runs it, said explicitly.
  EXPECT_EQ(ours.find_uint("llada-moe.expert_gating_func"), 1u);  // softmax
  EXPECT_EQ(ours.find_bool("llada-moe.expert_weights_norm"), false);
  EXPECT_EQ(ours.find_uint("llada-moe.leading_dense_block_count"), 0u);
  // The same tensors (llama.cpp writes output_norm after the layers, this converter with the other
  // whole-model tensors, before them).
  ASSERT_EQ(ours.tensors().size(), theirs.tensors().size());
  for (const GgufTensor& b : theirs.tensors()) {
    const GgufTensor* a = ours.find_tensor(b.name);
    ASSERT_NE(a, nullptr) << b.name;
    EXPECT_EQ(a->dims, b.dims) << b.name;
    EXPECT_EQ(a->type, b.type) << b.name;
    ASSERT_EQ(a->nbytes, b.nbytes) << b.name;
    EXPECT_TRUE(std::equal(a->data, a->data + a->nbytes, b.data)) << b.name;
  }
  std::vector<std::string> order;
  for (const GgufTensor& t : ours.tensors())
    if (t.name != "output_norm.weight") order.push_back(t.name);
  std::vector<std::string> want;
  for (const GgufTensor& t : theirs.tensors())
    if (t.name != "output_norm.weight") want.push_back(t.name);
  EXPECT_EQ(order, want);
}

TEST(LladaMoeGguf, ConvertedLoadsAsTheDirectoryAndLlamaCppsFile) {
  auto hf = load(test::data_path(kHf));
  auto ours = load(converted(GgmlType::kF32));
  auto theirs = load(test::data_path(kLlamaCpp));
  ASSERT_TRUE(hf && ours && theirs);
  for (const Model* m : {ours.get(), theirs.get()}) {
    const ModelInfo &a = hf->info(), &b = m->info();
    EXPECT_EQ(a.architecture, b.architecture);
    EXPECT_EQ(a.ffn_hidden, b.ffn_hidden);
    EXPECT_EQ(a.max_seq_len, b.max_seq_len);
    EXPECT_EQ(a.n_params, b.n_params);
    EXPECT_EQ(a.mask_id, b.mask_id);
    EXPECT_EQ(a.eos_id, b.eos_id);
    EXPECT_EQ(a.pad_id, b.pad_id);
    EXPECT_EQ(a.bos_id, b.bos_id);
    EXPECT_EQ(a.eot_id, b.eot_id);
    EXPECT_EQ(a.n_experts, b.n_experts);
    EXPECT_EQ(a.n_experts_used, b.n_experts_used);
  }
  int checked = 0;
  for (const auto& ids : golden_sequences()) {
    const auto want = logits(*hf, ids);
    EXPECT_EQ(logits(*ours, ids), want);
    EXPECT_EQ(logits(*theirs, ids), want);
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// The MoE keys, when a file has them, say how the router runs: renormalising the tiny model's top-2 weights
// changes its logits; an unknown gating function is an error naming the key.
TEST(LladaMoeGguf, MoeKeysAreReadWhenPresent) {
  const std::string renormalised = test::temp_path("llada_moe_norm.gguf");
  test::rewrite_gguf(test::data_path(kLlamaCpp), renormalised,
                     [](GgufWriter& w, std::vector<test::TensorCopy>&) {
                       w.set_bool("llada-moe.expert_weights_norm", true);
                     });
  auto plain = load(test::data_path(kLlamaCpp));
  auto norm = load(renormalised);
  ASSERT_TRUE(plain && norm);
  const auto ids = golden_sequences()[0];
  EXPECT_NE(logits(*plain, ids), logits(*norm, ids));
  std::remove(renormalised.c_str());

  const std::string bad = test::temp_path("llada_moe_gating.gguf");
  test::rewrite_gguf(test::data_path(kLlamaCpp), bad, [](GgufWriter& w, std::vector<test::TensorCopy>&) {
    w.set_uint32("llada-moe.expert_gating_func", 3);
  });
  LoadOptions o;
  auto m = Model::load(bad, o);
  std::remove(bad.c_str());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find("llada-moe.expert_gating_func"), std::string::npos) << m.error();
}

// Q8_0 (llama.cpp's CPU backend also quantises the activations, README §3, so only closeness is expected):
// the converted file keeps the router and norms F32 and stays near the goldens.
TEST(LladaMoeGguf, Q8FileStaysClose) {
  const GgufFile f(converted(GgmlType::kQ8_0));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_inp.weight")->type, GgmlType::kF32);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_exps.weight")->type, GgmlType::kQ8_0);
  auto hf = load(test::data_path(kHf));
  auto q8 = load(converted(GgmlType::kQ8_0));
  ASSERT_TRUE(hf && q8);
  for (const auto& ids : golden_sequences()) {
    const auto want = logits(*hf, ids), got = logits(*q8, ids);
    ASSERT_EQ(got.size(), want.size());
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    EXPECT_LT(worst, 2.0f);
    EXPECT_GT(worst, 0.0f);  // quantised for real
  }
}

}  // namespace
}  // namespace dllm
