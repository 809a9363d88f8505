// quant::LinearGgml: matmuls straight from GGUF Q8_0 / Q4_K blocks. Each kernel (AVX2, AVX512_VNNI) against
// the scalar reference in the same integer arithmetic (bit for bit: same integers, same order of float
// operations), against the f32 matmul of the dequantised weights (what quantising the activations costs), the
// view copying nothing, and MatMul running it.
#include "kernels/quant/linear_ggml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quant/quant.h"
#include "test_util.h"

namespace dllm {
namespace {

using quant::LinearGgml;
using Kernel = LinearGgml::Kernel;

using test::randn;

struct Case {
  GgmlType type;
  Kernel kernel;
};

std::string name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(ggml_type_name(static_cast<uint32_t>(info.param.type))) + "_" +
         LinearGgml::kernel_name(info.param.kernel);
}

class LinearGgmlKernel : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!LinearGgml::supported(GetParam().kernel))
      GTEST_SKIP() << LinearGgml::kernel_name(GetParam().kernel) << ": this CPU lacks "
                   << LinearGgml::kernel_requirement(GetParam().kernel)
                   << ", the kernel is built but cannot run here";
  }
};

// Bit-exact against forward_reference: K = 256 k, odd N (the 1-column tile edge of Q8_0), every tile height
// (M mod 4), accumulate on and off, an all-zero activation block (scale 0) and rounding ties.
TEST_P(LinearGgmlKernel, BitIdenticalToScalarReference) {
  const auto [type, kernel] = GetParam();
  for (const auto& [N, K] : {std::pair<int64_t, int64_t>{37, 512}, {1, 256}, {3, 2048}, {17, 768}}) {
    const auto w = randn(N * K, 11 + N, 0.05f);
    const auto l = LinearGgml::quantize_f32(type, w.data(), N, K);
    for (int64_t M : {1, 2, 3, 5, 8, 32}) {
      auto x = randn(M * K, 100 + M, 1.0f);
      std::fill_n(x.begin(), 256, 0.0f);  // a zero Q8_K block, eight zero Q8_0 blocks
      if (K >= 512) {
        const float ties[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f, -127.0f};
        std::copy(std::begin(ties), std::end(ties), x.begin() + 256);
      }
      for (bool accumulate : {false, true}) {
        std::vector<float> y(M * N, accumulate ? 0.25f : -7.0f), ref = y;
        l.forward(kernel, x.data(), M, y.data(), accumulate);
        l.forward_reference(x.data(), M, ref.data(), accumulate);
        for (int64_t i = 0; i < M * N; ++i)
          ASSERT_EQ(y[i], ref[i]) << "N " << N << " K " << K << " M " << M << " accumulate " << accumulate
                                  << " i " << i;
      }
    }
  }
}

// Against y = x · dequant(W)ᵀ in double: only the activations' quantisation differs (8 bits per element, one
// scale per 32 for Q8_0 and per 256 for Q8_K, so Q8_K's error is larger). Relative RMS error over the output.
TEST_P(LinearGgmlKernel, CloseToF32MatmulOfDequantisedWeights) {
  const auto [type, kernel] = GetParam();
  const double tolerance = type == GgmlType::kQ8_0 ? 0.01 : 0.02;
  const int64_t N = 65, K = 1024;
  const auto w = randn(N * K, 5, 0.05f);
  const auto l = LinearGgml::quantize_f32(type, w.data(), N, K);
  std::vector<float> wdq(N * K);
  for (int64_t n = 0; n < N; ++n) l.dequantize_row(n, wdq.data() + n * K);
  for (int64_t M : {1, 2, 3, 5, 8, 32}) {
    const auto x = randn(M * K, 7 + M, 1.0f);
    std::vector<float> y(M * N);
    l.forward(kernel, x.data(), M, y.data());
    double num = 0, den = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += double(x[m * K + k]) * wdq[n * K + k];
        num += (y[m * N + n] - s) * (y[m * N + n] - s);
        den += s * s;
      }
    EXPECT_LT(std::sqrt(num / den), tolerance) << "M " << M;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, LinearGgmlKernel,
    ::testing::Values(Case{GgmlType::kQ8_0, Kernel::kAvx2}, Case{GgmlType::kQ4_K, Kernel::kAvx2},
                      Case{GgmlType::kQ6_K, Kernel::kAvx2}, Case{GgmlType::kQ8_0, Kernel::kAvx512Vnni},
                      Case{GgmlType::kQ4_K, Kernel::kAvx512Vnni}, Case{GgmlType::kQ6_K, Kernel::kAvx512Vnni},
                      Case{GgmlType::kQ4_0, Kernel::kAvx2}, Case{GgmlType::kQ4_0, Kernel::kAvx512Vnni},
                      Case{GgmlType::kQ8_0, Kernel::kAvxVnni}, Case{GgmlType::kQ4_0, Kernel::kAvxVnni},
                      Case{GgmlType::kQ4_K, Kernel::kAvxVnni}, Case{GgmlType::kQ6_K, Kernel::kAvxVnni}),
    name);

// The Q8_K activation quantiser (ggml's quantize_row_q8_K): the signed extreme maps to -127, the sums of 32
// are the sums of the int8s, and the dequantised values are within half a step.
TEST(LinearGgml, Q8KActivations) {
  const int64_t K = 512;
  auto x = randn(K, 3, 1.0f);
  x[300] = -9.0f;  // the extreme of block 1 is negative: scale > 0, q = -127 there
  std::vector<int8_t> q(K);
  std::vector<float> d(2);
  std::vector<int16_t> s(16);
  quant::quantize_activations_q8_k(x.data(), 1, K, q.data(), d.data(), s.data());
  EXPECT_EQ(q[300], -127);
  EXPECT_FLOAT_EQ(d[1], 9.0f / 127.0f);
  for (int c = 0; c < 16; ++c) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += q[32 * c + j];
    EXPECT_EQ(s[c], sum);
  }
  for (int64_t i = 0; i < K; ++i) EXPECT_NEAR(q[i] * d[i / 256], x[i], 0.5f * std::fabs(d[i / 256]) + 1e-6f);
}

// A view reads the caller's blocks where they are: same pointer, no copy, weight_bytes() = the tensor's
// bytes.
TEST(LinearGgml, ViewDoesNotCopy) {
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const int64_t N = 7, K = 512;
    const auto w = randn(N * K, 9, 0.05f);
    std::vector<uint8_t> file(ggml_row_bytes(type, K) * N);
    quant::quantize(type, w.data(), file.data(), N * K);
    const auto v = LinearGgml::view(type, file.data(), N, K);
    EXPECT_EQ(v.data(), file.data());
    EXPECT_FALSE(v.owns_data());
    EXPECT_EQ(v.weight_bytes(), file.size());
    const bool small = type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0;  // 32-element blocks
    const size_t block_bytes = type == GgmlType::kQ8_0   ? 34
                               : type == GgmlType::kQ4_0 ? 18
                               : type == GgmlType::kQ4_K ? 144
                                                         : 210;
    EXPECT_EQ(v.weight_bytes(), static_cast<size_t>(N * K / (small ? 32 : 256)) * block_bytes);
    // The owning constructor holds the same bytes quant::quantize writes.
    const auto owned = LinearGgml::quantize_f32(type, w.data(), N, K);
    EXPECT_TRUE(owned.owns_data());
    EXPECT_NE(owned.data(), file.data());
    EXPECT_EQ(std::memcmp(owned.data(), file.data(), file.size()), 0);
    // Changing the file's bytes changes what the view multiplies (it reads them at each call).
    const auto x = randn(K, 4, 1.0f);
    std::vector<float> before(N), after(N);
    v.forward(x.data(), 1, before.data());
    std::fill(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(v.row_bytes()), uint8_t{0});
    v.forward(x.data(), 1, after.data());
    EXPECT_EQ(after[0], 0.0f);
    for (int64_t n = 1; n < N; ++n) EXPECT_EQ(after[n], before[n]);
  }
}

TEST(LinearGgml, RejectsWhatItCannotRun) {
  const std::vector<uint8_t> bytes(4096);
  EXPECT_ANY_THROW(LinearGgml::view(GgmlType::kQ4_K, bytes.data(), 2, 128));  // not whole super-blocks
  EXPECT_ANY_THROW(LinearGgml::view(GgmlType::kQ8_0, bytes.data(), 2, 48));
  EXPECT_ANY_THROW(LinearGgml::view(GgmlType::kQ6_K, bytes.data(), 2, 128));
  EXPECT_ANY_THROW(LinearGgml::view(GgmlType::kQ4_0, bytes.data(), 2, 48));
  EXPECT_ANY_THROW(LinearGgml::view(GgmlType::kBF16, bytes.data(), 2, 256));
  EXPECT_ANY_THROW(LinearGgml::view(GgmlType::kF32, bytes.data(), 2, 256));
  EXPECT_TRUE(LinearGgml::supported(Kernel::kAvx2));
  EXPECT_TRUE(LinearGgml::supported(LinearGgml::best_kernel()));
}

// An expert's gate and up with the activations quantised once: the same bits as two forwards; matrices of
// different types or widths fall back to two forwards.
TEST(LinearGgml, SharedInputEqualsTwoForwards) {
  const int64_t K = 512, M = 3;
  const auto x = randn(M * K, 31, 1.0f);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    const auto wa = randn(40 * K, 32, 0.05f), wb = randn(24 * K, 33, 0.05f);
    const auto a = LinearGgml::quantize_f32(type, wa.data(), 40, K);
    const auto b = LinearGgml::quantize_f32(type, wb.data(), 24, K);
    std::vector<float> ya(M * 40), yb(M * 24), want_a(ya.size()), want_b(yb.size());
    a.forward(x.data(), M, want_a.data());
    b.forward(x.data(), M, want_b.data());
    LinearGgml::forward_shared_input(a, ya.data(), b, yb.data(), x.data(), M);
    EXPECT_EQ(ya, want_a);
    EXPECT_EQ(yb, want_b);
  }
  const auto w = randn(8 * K, 34, 0.05f);
  const auto q4 = LinearGgml::quantize_f32(GgmlType::kQ4_K, w.data(), 8, K);
  const auto q8 = LinearGgml::quantize_f32(GgmlType::kQ8_0, w.data(), 8, K);
  std::vector<float> y4(M * 8), y8(M * 8), want4(M * 8), want8(M * 8);
  q4.forward(x.data(), M, want4.data());
  q8.forward(x.data(), M, want8.data());
  LinearGgml::forward_shared_input(q4, y4.data(), q8, y8.data(), x.data(), M);
  EXPECT_EQ(y4, want4);
  EXPECT_EQ(y8, want8);
}

// Called from inside a parallel region (one expert per thread), a forward runs on its own thread and must not
// share out its loops over the enclosing team: every thread's result equals the forward made outside.
TEST(LinearGgml, InsideAParallelRegion) {
  const int64_t N = 300, K = 1024, M = 2;
  const auto w = randn(N * K, 41, 0.05f), x = randn(M * K, 42, 1.0f);
  const auto l = LinearGgml::quantize_f32(GgmlType::kQ4_K, w.data(), N, K);
  std::vector<float> want(M * N);
  l.forward(x.data(), M, want.data());
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> got(kThreads, std::vector<float>(M * N));
#pragma omp parallel for num_threads(kThreads) schedule(static, 1)
  for (int t = 0; t < kThreads; ++t) l.forward(x.data(), M, got[t].data());
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(got[t], want) << "thread " << t;
}

// MatMul runs it as a third kind of weights; is_q8() stays about LinearQ8 only.
TEST(LinearGgml, ThroughMatMul) {
  const int64_t N = 33, K = 512, M = 5;
  const auto w = randn(N * K, 21, 0.05f), x = randn(M * K, 22, 1.0f);
  auto l = std::make_shared<const LinearGgml>(LinearGgml::quantize_f32(GgmlType::kQ4_K, w.data(), N, K));
  const MatMul mm(l);
  EXPECT_TRUE(mm.is_ggml());
  EXPECT_FALSE(mm.is_q8());
  EXPECT_EQ(mm.ggml(), l);
  EXPECT_EQ(mm.out_features(), N);
  EXPECT_EQ(mm.in_features(), K);
  EXPECT_EQ(mm.weight_bytes(), l->weight_bytes());
  std::vector<float> want(M * N), got(M * N, 1.0f);
  l->forward(x.data(), M, want.data());
  mm.forward(x.data(), M, got.data());
  EXPECT_EQ(got, want);
  mm.forward(x.data(), M, got.data(), /*accumulate=*/true);
  for (int64_t i = 0; i < M * N; ++i) EXPECT_EQ(got[i], want[i] + want[i]);
  const MatMul q8 = quant::LinearQ8::from_f32(w.data(), N, K);
  EXPECT_TRUE(q8.is_q8());
  EXPECT_FALSE(q8.is_ggml());
  EXPECT_ANY_THROW(q8.ggml());
}

}  // namespace
}  // namespace dllm
