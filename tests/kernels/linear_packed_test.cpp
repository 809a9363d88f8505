// quant::LinearPacked: Q8_0 / Q4_0 / Q4_K weights repacked into panels of 16 rows. Each kernel (AVX2,
// AVX-VNNI, AVX512_VNNI, AMX_INT8) against the scalar reference bit for bit; the packing itself against the
// file's blocks (dequantize_row = quant::dequantize of the original rows, so a mis-placed byte cannot hide
// behind a reference that reads the same panels); the products against LinearGgml on the same blocks (the
// same integer dots, summed in another order); thread counts; MatMul running it.
#include "kernels/quant/linear_packed.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/quant/linear_ggml.h"
#include "kernels/quant/quant.h"
#include "test_util.h"

namespace dllm {
namespace {

using quant::LinearPacked;
using Kernel = LinearPacked::Kernel;

using test::randn;

// GGUF blocks of `type` for random weights; for Q8_0 one weight byte is -128 (valid in a file, though ggml's
// quantiser never writes it: |w| then needs 8 bits, the edge of the AVX2 sign trick).
std::vector<uint8_t> file_blocks(GgmlType type, int64_t N, int64_t K, uint32_t seed) {
  const auto w = randn(N * K, seed, 0.05f);
  std::vector<uint8_t> blocks(ggml_row_bytes(type, K) * N);
  quant::quantize(type, w.data(), blocks.data(), N * K);
  if (type == GgmlType::kQ8_0) blocks[2 + 5] = 0x80;
  return blocks;
}

// K for a type: whole blocks (Q4_K's are 256 wide).
int64_t width(GgmlType type, int64_t k) {
  return type == GgmlType::kQ4_K ? (k + 255) / 256 * 256 : k;
}

struct Case {
  GgmlType type;
  Kernel kernel;
};

std::string name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(ggml_type_name(static_cast<uint32_t>(info.param.type))) + "_" +
         LinearPacked::kernel_name(info.param.kernel);
}

class LinearPackedKernel : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!LinearPacked::supported(GetParam().kernel))
      GTEST_SKIP() << LinearPacked::kernel_name(GetParam().kernel) << ": this CPU lacks "
                   << LinearPacked::kernel_requirement(GetParam().kernel)
                   << ", the kernel is built but cannot run here";
  }
};

// Every tile edge: 1-5 panels (an odd count leaves a one-panel item for VNNI's two-panel tiles), M from 1 to
// 33 (every tile height), accumulate on and off, an all-zero activation block (scale 0), rounding ties, and
// activations at +-127 against the -128 weight.
TEST_P(LinearPackedKernel, BitIdenticalToScalarReference) {
  const auto [type, kernel] = GetParam();
  int cases = 0;
  // K = 224: 7 blocks, AMX's groups of 4 and then a tail of 3.
  for (const auto& [N, K0] :
       {std::pair<int64_t, int64_t>{16, 32}, {48, 256}, {80, 1024}, {32, 96}, {32, 224}}) {
    const int64_t K = width(type, K0) + (type == GgmlType::kQ4_K && K0 == 96 ? 256 : 0);
    const auto blocks = file_blocks(type, N, K, 11 + static_cast<uint32_t>(N));
    const auto l = LinearPacked::pack(type, blocks.data(), N, K, kernel);
    ASSERT_EQ(l.kernel(), kernel);
    for (int64_t M : {1, 2, 3, 4, 5, 7, 8, 33}) {  // 33: two AMX tiles of 16 rows and one row beside
      auto x = randn(M * K, 100 + static_cast<uint32_t>(M), 1.0f);
      const int64_t zero = type == GgmlType::kQ4_K ? 256 : 32;  // one whole activation block
      std::fill_n(x.begin(), zero, 0.0f);
      if (K >= zero + 32) {
        const float ties[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f, -127.0f};
        std::copy(std::begin(ties), std::end(ties), x.begin() + zero);
      }
      for (bool accumulate : {false, true}) {
        std::vector<float> y(M * N, accumulate ? 0.25f : -7.0f), ref = y;
        l.forward(x.data(), M, y.data(), accumulate);
        l.forward_reference(x.data(), M, ref.data(), accumulate);
        for (int64_t i = 0; i < M * N; ++i)
          ASSERT_EQ(y[i], ref[i]) << "N " << N << " K " << K << " M " << M << " accumulate " << accumulate
                                  << " i " << i;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 5 * 8 * 2);
}

// The panels hold the file's numbers: each row read back equals quant::dequantize of the original blocks.
TEST_P(LinearPackedKernel, PanelsHoldTheFileBlocks) {
  const auto [type, kernel] = GetParam();
  const int64_t N = 48, K = width(type, 320);
  const auto blocks = file_blocks(type, N, K, 3);
  const auto l = LinearPacked::pack(type, blocks.data(), N, K, kernel);
  // Re-ordered, not requantised: the file's size (Q4_K: + 16 bytes per 16 x 256 for unpacked scales / mins).
  EXPECT_EQ(l.weight_bytes(), blocks.size() + (type == GgmlType::kQ4_K ? N * K / 256 * 4 : 0));
  std::vector<float> want(K), got(K);
  for (int64_t n = 0; n < N; ++n) {
    quant::dequantize(type, blocks.data() + n * ggml_row_bytes(type, K), want.data(), K);
    l.dequantize_row(n, got.data());
    ASSERT_EQ(got, want) << "row " << n;
  }
}

// The same integer dot per block as the in-place kernels, only summed in another float order.
TEST_P(LinearPackedKernel, AgreesWithInPlaceBlocks) {
  const auto [type, kernel] = GetParam();
  const int64_t N = 64, K = 2048, M = 6;
  const auto blocks = file_blocks(type, N, K, 8);
  const auto packed = LinearPacked::pack(type, blocks.data(), N, K, kernel);
  const auto inplace = quant::LinearGgml::view(type, blocks.data(), N, K);
  const auto x = randn(M * K, 9, 1.0f);
  std::vector<float> a(M * N), b(M * N);
  packed.forward(x.data(), M, a.data());
  inplace.forward_reference(x.data(), M, b.data());
  for (int64_t i = 0; i < M * N; ++i) EXPECT_NEAR(a[i], b[i], 1e-5f * (1 + std::fabs(b[i]))) << i;
}

// The same bits on 1 and 2 threads (each output is summed by one thread in a fixed order), on a matrix big
// enough to be split.
TEST_P(LinearPackedKernel, SameBitsForAnyThreadCount) {
  const auto [type, kernel] = GetParam();
  const int64_t N = 512, K = 1024, M = 37;
  const auto blocks = file_blocks(type, N, K, 21);
  const auto l = LinearPacked::pack(type, blocks.data(), N, K, kernel);
  const auto x = randn(M * K, 22, 1.0f);
  std::vector<float> one(M * N), two(M * N);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  l.forward(x.data(), M, one.data());
  omp_set_num_threads(2);
  l.forward(x.data(), M, two.data());
  omp_set_num_threads(threads);
  EXPECT_EQ(one, two);
}

// Matrices of one input in one region (a layer's q, k, v: 896 / 128 / 128 rows at Qwen2.5-0.5B's width, here
// 3 / 1 / 1 parts of that; gate and up): each output the bits of the reference, on 1 and 2 threads, with
// item boundaries that cut through matrices and tile pairs, for the few-row (streaming) and many-row splits.
TEST_P(LinearPackedKernel, GroupGivesEachMatrixItsOwnBits) {
  const auto [type, kernel] = GetParam();
  const int64_t K = width(type, 1024);
  int checked = 0;
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{48, 16, 16}, std::vector<int64_t>{1040, 1040}, std::vector<int64_t>{16},
        std::vector<int64_t>{2048, 16, 48}}) {
    std::vector<LinearPacked> ws;
    for (size_t i = 0; i < shape.size(); ++i) {
      const auto blocks = file_blocks(type, shape[i], K, 40 + static_cast<uint32_t>(i));
      ws.push_back(LinearPacked::pack(type, blocks.data(), shape[i], K, kernel));
    }
    for (int64_t M : {1, 2, 4, 5, 17}) {
      const auto x = randn(M * K, 50 + static_cast<uint32_t>(M), 1.0f);
      for (int threads : {1, 2}) {
        std::vector<std::vector<float>> ys;
        std::vector<LinearPacked::Output> outs;
        for (const auto& w : ws) ys.emplace_back(M * w.out_features(), -1.0f);
        for (size_t i = 0; i < ws.size(); ++i) outs.push_back({&ws[i], ys[i].data()});
        const int saved = omp_get_max_threads();
        omp_set_num_threads(threads);
        LinearPacked::forward_group(outs, x.data(), M);
        omp_set_num_threads(saved);
        for (size_t i = 0; i < ws.size(); ++i) {
          std::vector<float> want(M * ws[i].out_features());
          ws[i].forward_reference(x.data(), M, want.data());
          ASSERT_EQ(ys[i], want) << "matrix " << i << " of " << ws.size() << ", M=" << M << ", " << threads
                                 << " threads";
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * 5 * 9);
}

// forward_group_share: the shares of 1, 2 and 3 threads (run here one after another, as the threads of a
// region would run them side by side) together give each matrix the bits of its reference, accumulating too;
// more rows than a share takes is an error.
TEST_P(LinearPackedKernel, SharesOfAGroupGiveEachMatrixItsOwnBits) {
  const auto [type, kernel] = GetParam();
  const int64_t K = width(type, 1024);
  std::vector<LinearPacked> ws;
  for (int64_t rows : {48, 16, 16}) {
    const auto blocks = file_blocks(type, rows, K, 60 + static_cast<uint32_t>(ws.size()));
    ws.push_back(LinearPacked::pack(type, blocks.data(), rows, K, kernel));
  }
  int checked = 0;
  for (int64_t M : {1, 2, 4})
    for (bool accumulate : {false, true})
      for (int threads : {1, 2, 3}) {
        const auto x = randn(M * K, 70 + static_cast<uint32_t>(M), 1.0f);
        std::vector<std::vector<float>> ys;
        std::vector<LinearPacked::Output> outs;
        for (const auto& w : ws) ys.emplace_back(M * w.out_features(), 0.5f);
        for (size_t i = 0; i < ws.size(); ++i) outs.push_back({&ws[i], ys[i].data()});
        for (int t = 0; t < threads; ++t)
          LinearPacked::forward_group_share(outs, x.data(), M, accumulate, t, threads);
        for (size_t i = 0; i < ws.size(); ++i) {
          std::vector<float> want(M * ws[i].out_features(), 0.5f);
          ws[i].forward_reference(x.data(), M, want.data(), accumulate);
          ASSERT_EQ(ys[i], want) << "matrix " << i << ", M=" << M << ", " << threads << " threads"
                                 << (accumulate ? ", accumulating" : "");
          ++checked;
        }
      }
  EXPECT_EQ(checked, 3 * 2 * 3 * 3);
  std::vector<float> y(5 * 48);
  const std::vector<float> x(5 * K);
  const LinearPacked::Output out{&ws[0], y.data()};
  EXPECT_THROW(LinearPacked::forward_group_share({&out, 1}, x.data(), 5, false, 0, 2), Error);
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, LinearPackedKernel,
    ::testing::Values(Case{GgmlType::kQ8_0, Kernel::kAvx2}, Case{GgmlType::kQ4_0, Kernel::kAvx2},
                      Case{GgmlType::kQ4_K, Kernel::kAvx2}, Case{GgmlType::kQ8_0, Kernel::kAvx512Vnni},
                      Case{GgmlType::kQ4_0, Kernel::kAvx512Vnni}, Case{GgmlType::kQ4_K, Kernel::kAvx512Vnni},
                      Case{GgmlType::kQ8_0, Kernel::kAvxVnni}, Case{GgmlType::kQ4_0, Kernel::kAvxVnni},
                      Case{GgmlType::kQ4_K, Kernel::kAvxVnni}, Case{GgmlType::kQ8_0, Kernel::kAmx},
                      Case{GgmlType::kQ4_0, Kernel::kAmx}, Case{GgmlType::kQ4_K, Kernel::kAmx}),
    name);

TEST(LinearPacked, RejectsWhatItCannotPack) {
  const std::vector<uint8_t> bytes(1 << 16);
  EXPECT_FALSE(LinearPacked::can_pack(GgmlType::kQ8_0, 17, 64));   // rows not whole panels
  EXPECT_FALSE(LinearPacked::can_pack(GgmlType::kQ4_0, 16, 48));   // not whole blocks
  EXPECT_FALSE(LinearPacked::can_pack(GgmlType::kQ4_K, 16, 128));  // not whole super-blocks
  EXPECT_FALSE(LinearPacked::can_pack(GgmlType::kQ6_K, 16, 256));
  EXPECT_TRUE(LinearPacked::can_pack(GgmlType::kQ4_K, 16, 256));
  EXPECT_TRUE(LinearPacked::can_pack(GgmlType::kQ4_0, 32, 64));
  try {
    LinearPacked::pack(GgmlType::kQ8_0, bytes.data(), 17, 64);
    FAIL() << "packed 17 rows";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("17 x 64 Q8_0"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(LinearPacked::supported(Kernel::kAvx2));
  EXPECT_TRUE(LinearPacked::supported(LinearPacked::best_kernel()));
}

// MatMul::forward_group: packed matrices of one type and width go together; anything else (another block
// type, another width, plain weights) falls back to one forward each. The bits are those of forward() alike.
TEST(LinearPacked, MatMulGroupsWhatItCanAndRunsTheRestAlone) {
  const int64_t K = 256, M = 2;
  const auto w = randn(64 * K, 7, 0.05f);
  const MatMul a(LinearPacked::quantize_f32(GgmlType::kQ8_0, w.data(), 32, K));
  const MatMul b(LinearPacked::quantize_f32(GgmlType::kQ8_0, w.data() + 32 * K, 16, K));
  const MatMul c(LinearPacked::quantize_f32(GgmlType::kQ4_0, w.data(), 48, K));
  EXPECT_TRUE(LinearPacked::can_group(*a.packed(), *b.packed()));
  EXPECT_FALSE(LinearPacked::can_group(*a.packed(), *c.packed()));
  const auto x = randn(M * K, 8, 1.0f);
  for (const std::vector<const MatMul*>& group :
       {std::vector<const MatMul*>{&a, &b}, std::vector<const MatMul*>{&a, &c, &b}}) {
    std::vector<std::vector<float>> ys;
    std::vector<float*> outs;
    for (const MatMul* m : group) ys.emplace_back(M * m->out_features());
    for (auto& y : ys) outs.push_back(y.data());
    MatMul::forward_group(group, x.data(), M, outs);
    for (size_t i = 0; i < group.size(); ++i) {
      std::vector<float> want(M * group[i]->out_features());
      group[i]->forward(x.data(), M, want.data());
      EXPECT_EQ(ys[i], want) << "matrix " << i;
    }
  }
  std::vector<LinearPacked::Output> mixed{{a.packed().get(), nullptr}, {c.packed().get(), nullptr}};
  try {
    LinearPacked::forward_group(mixed, x.data(), M);
    FAIL() << "grouped Q8_0 with Q4_0";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("Q8_0 x 256 and Q4_0 x 256"), std::string::npos) << e.what();
  }
}

// Through MatMul, as the transformer runs it.
TEST(LinearPacked, RunsThroughMatMul) {
  const int64_t N = 32, K = 128, M = 3;
  const auto w = randn(N * K, 5, 0.05f);
  const auto l = LinearPacked::quantize_f32(GgmlType::kQ8_0, w.data(), N, K);
  const MatMul mm(l);
  EXPECT_TRUE(mm.is_packed());
  EXPECT_EQ(mm.out_features(), N);
  EXPECT_EQ(mm.in_features(), K);
  const auto x = randn(M * K, 6, 1.0f);
  std::vector<float> y(M * N), want(M * N);
  mm.forward(x.data(), M, y.data());
  l.forward_reference(x.data(), M, want.data());
  EXPECT_EQ(y, want);
}

}  // namespace
}  // namespace dllm
