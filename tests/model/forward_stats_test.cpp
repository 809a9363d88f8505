// Model::forward_stats against the host's double reduction of forward()'s logits, on the backend the golden
// tests run on (DLLM_TEST_BACKEND=vulkan: the device's f32 token_stats, and only the stats come back).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/logit_stats.h"
#include "dllm/dllm.h"
#include "model/transformer.h"
#include "test_util.h"

namespace dllm {
namespace {

std::shared_ptr<Model> load(const std::string& name) {
  LoadOptions o;
  o.precision = Precision::kF32;
  o.backend = test::backend();
  return Model::load(test::data_path("oracle/models/" + name), o).value();
}

// Rows of several shapes: a logits window, two rows with padding (Dream), block-causal attention (SDAR).
struct Input {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> valid;
  int64_t batch = 1, logits_from = 0, logits_to = 0, block = 0;
};

void expect_stats_match(Model& model, const Input& x, int& rows_checked) {
  ForwardInput in;
  in.tokens = x.tokens;
  in.valid = x.valid;
  in.batch = x.batch;
  in.logits_from = x.logits_from;
  in.logits_to = x.logits_to;
  in.attention_block = x.block;
  const std::vector<float> logits = model.forward(in).value();
  const std::vector<LogitStats> got = model.forward_stats(in).value();
  const int64_t vocab = model.info().vocab_size;
  ASSERT_EQ(got.size() * static_cast<size_t>(vocab), logits.size());
  std::vector<LogitStats> want(got.size());
  logit_stats_host(logits.data(), static_cast<int64_t>(want.size()), vocab, want.data());
  for (size_t r = 0; r < got.size(); ++r) {
    EXPECT_EQ(got[r].argmax, want[r].argmax) << "row " << r;
    // f32 on a device against double: a few ulps of the probabilities, the entropy's sum over the vocabulary.
    EXPECT_NEAR(got[r].p_max, want[r].p_max, 2e-6) << "row " << r;
    EXPECT_NEAR(got[r].margin, want[r].margin, 2e-6) << "row " << r;
    EXPECT_NEAR(got[r].neg_entropy, want[r].neg_entropy, 2e-5 * (1 + std::abs(want[r].neg_entropy)))
        << "row " << r;
    ++rows_checked;
  }
}

TEST(ForwardStats, MatchTheHostReductionOfTheLogits) {
  int rows = 0;
  {
    auto m = load("llada_tiny_f32");
    expect_stats_match(*m, {{5, 9, 500, 500, 500, 7, 500, 3}, {}, 1, 2, 7, 0}, rows);
  }
  {
    auto m = load("dream_tiny_gqa_f32");
    Input x;
    x.tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    x.valid = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    x.batch = 2;
    expect_stats_match(*m, x, rows);
  }
  {
    auto m = load("sdar_tiny_f32");
    expect_stats_match(*m, {{11, 12, 13, 14, 15, 16, 17, 18}, {}, 1, 4, 0, 4}, rows);
  }
  EXPECT_EQ(rows, 5 + 10 + 4);
}

// On a device, a step's stats come back instead of its logits: 16 bytes a row, not vocab_size x 4.
TEST(ForwardStats, OnADeviceOnlyTheStatsComeBack) {
  auto m = load("llada_tiny_f32");
  auto* t = dynamic_cast<Transformer*>(m.get());
  ASSERT_NE(t, nullptr);
  if (!m->reduces_on_device()) GTEST_SKIP() << "the CPU backend: forward_stats reduces the host's logits";
  const std::vector<int32_t> tokens(32, 500);  // the mask id
  ForwardInput in;
  in.tokens = tokens;
  const double before = t->backend().traffic().downloaded;
  ASSERT_TRUE(m->forward_stats(in).ok());
  const double stats_bytes = t->backend().traffic().downloaded - before;
  ASSERT_TRUE(m->forward(in).ok());
  const double logits_bytes = t->backend().traffic().downloaded - before - stats_bytes;
  EXPECT_EQ(stats_bytes, 32.0 * 16);
  EXPECT_EQ(logits_bytes, 32.0 * 4 * static_cast<double>(m->info().vocab_size));
}

}  // namespace
}  // namespace dllm
