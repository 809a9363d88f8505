// The study's looser infill measure (token edit similarity) against hand-computed edit distances.
#include <gtest/gtest.h>

#include <vector>

#include "study/study.h"

namespace dllm::study {
namespace {

double sim(const std::vector<int32_t>& filled, const std::vector<int32_t>& truth) {
  EXPECT_EQ(filled.size(), truth.size());
  return token_similarity(filled.data(), truth.data(), static_cast<int64_t>(truth.size()));
}

TEST(TokenSimilarity, IdenticalIsOneAndDisjointIsZero) {
  EXPECT_DOUBLE_EQ(sim({1, 2, 3, 4}, {1, 2, 3, 4}), 1.0);
  EXPECT_DOUBLE_EQ(sim({5, 6, 7, 8}, {1, 2, 3, 4}), 0.0);
  EXPECT_DOUBLE_EQ(sim({}, {}), 1.0);
}

TEST(TokenSimilarity, AShiftCostsTwoEditsNotEveryToken) {
  // One token dropped at the front and one repeated at the end: exact-token accuracy 0 of 6, edit distance 2.
  EXPECT_DOUBLE_EQ(sim({2, 3, 4, 5, 6, 6}, {1, 2, 3, 4, 5, 6}), 1.0 - 2.0 / 6.0);
  // One substitution.
  EXPECT_DOUBLE_EQ(sim({1, 9, 3, 4}, {1, 2, 3, 4}), 0.75);
  // A swap of two neighbours is two substitutions (Levenshtein, no transpositions).
  EXPECT_DOUBLE_EQ(sim({2, 1, 3, 4}, {1, 2, 3, 4}), 0.5);
}

}  // namespace
}  // namespace dllm::study
