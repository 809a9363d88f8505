// GenerateParams::mask_id / eos_id: the official LLaDA2 generate() takes the ids as arguments, and a model whose
// files do not name its mask id can only run with one given.
#include <gtest/gtest.h>

#include "denoise/denoiser.h"
#include "dllm/dllm.h"

namespace dllm {
namespace {

ModelInfo info(int32_t mask) {
  ModelInfo i;
  i.path = "some/model";
  i.vocab_size = 100;
  i.mask_id = mask;
  i.eos_id = 7;
  return i;
}

TEST(TokenOverrides, DefaultsKeepTheModelsIds) {
  const ModelInfo out = with_token_overrides(info(99), GenerateParams{});
  EXPECT_EQ(out.mask_id, 99);
  EXPECT_EQ(out.eos_id, 7);
}

TEST(TokenOverrides, GivenIdsReplaceThem) {
  GenerateParams p;
  p.mask_id = 3;
  p.eos_id = 4;
  const ModelInfo out = with_token_overrides(info(99), p);
  EXPECT_EQ(out.mask_id, 3);
  EXPECT_EQ(out.eos_id, 4);
}

TEST(TokenOverrides, OutOfVocabularyIsAnError) {
  GenerateParams p;
  p.mask_id = 100;
  try {
    with_token_overrides(info(99), p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mask_id 100 is outside the vocabulary"), std::string::npos) << e.what();
  }
}

TEST(TokenOverrides, AModelWithoutMaskIdNeedsOne) {
  try {
    with_token_overrides(info(-1), GenerateParams{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--mask-id"), std::string::npos) << e.what();
  }
  GenerateParams p;
  p.mask_id = 5;
  EXPECT_EQ(with_token_overrides(info(-1), p).mask_id, 5);
}

}  // namespace
}  // namespace dllm
