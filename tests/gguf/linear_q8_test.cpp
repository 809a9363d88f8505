// The 8-bit Q8_0 x Q8_0 matmul: the AVX2 kernel against its scalar reference (the same arithmetic, bit for
// bit, over every micro-kernel tile shape and row blocking) and against the f32 matmul of the dequantised
// weights (what activation quantisation costs). Speed: bench/micro/matmul_bench.cpp.
#include "kernels/quant/linear_q8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/quant/quant.h"
#include "test_util.h"

namespace dllm {
namespace {

using test::randn;

TEST(LinearQ8, KernelMatchesScalarReferenceAndF32) {
  const int64_t N = 96, K = 256;
  const auto w = randn(N * K, 1, 0.05f);
  const auto l = quant::LinearQ8::from_f32(w.data(), N, K);
  EXPECT_LT(l.weight_bytes(), static_cast<size_t>(N * K * 4 / 3));
  std::vector<uint8_t> blocks(ggml_row_bytes(GgmlType::kQ8_0, K) * N);
  quant::quantize(GgmlType::kQ8_0, w.data(), blocks.data(), N * K);
  std::vector<float> wdq(w.size());
  quant::dequantize(GgmlType::kQ8_0, blocks.data(), wdq.data(), N * K);
  for (int64_t M : {1, 3, 4, 7, 16}) {
    const auto x = randn(M * K, 2 + M, 1.0f);
    std::vector<float> y(M * N), ref(M * N), exact(M * N, 0.0f);
    l.forward(x.data(), M, y.data());
    l.forward_reference(x.data(), M, ref.data());
    double num = 0, den = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += double(x[m * K + k]) * wdq[n * K + k];
        exact[m * N + n] = static_cast<float>(s);
      }
    for (int64_t i = 0; i < M * N; ++i) {
      ASSERT_EQ(y[i], ref[i]) << "M " << M << " i " << i;
      num += (y[i] - exact[i]) * double(y[i] - exact[i]);
      den += exact[i] * double(exact[i]);
    }
    EXPECT_LT(std::sqrt(num / den), 0.01) << "activation quantisation error, M " << M;
    // accumulate adds to y.
    std::vector<float> acc(M * N, 1.0f);
    l.forward(x.data(), M, acc.data(), true);
    for (int64_t i = 0; i < M * N; ++i) ASSERT_NEAR(acc[i], y[i] + 1.0f, 1e-4f * (1 + std::abs(y[i])));
  }
}

// Bit-level agreement with the scalar reference for every tile shape (4x2 and the 1..3 row / 1 column edges),
// several row blocks (K = 8192: 24 rows per L2 block), accumulate, zero blocks (scale 0) and rounding ties.
TEST(LinearQ8, KernelBitIdenticalToReferenceOverTileShapes) {
  for (const auto& [N, K] : {std::pair<int64_t, int64_t>{37, 8192}, {2, 64}, {1, 32}, {9, 96}}) {
    const auto w = randn(N * K, 11, 0.05f);
    const auto l = quant::LinearQ8::from_f32(w.data(), N, K);
    for (int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 53}) {
      auto x = randn(M * K, 100 + M, 1.0f);
      std::fill_n(x.begin(), 32, 0.0f);  // a zero block
      if (K >= 64) {
        const float ties[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f};
        std::copy(std::begin(ties), std::end(ties), x.begin() + 32);
      }
      std::vector<float> y(M * N), ref(M * N);
      l.forward(x.data(), M, y.data());
      l.forward_reference(x.data(), M, ref.data());
      for (int64_t i = 0; i < M * N; ++i)
        ASSERT_EQ(y[i], ref[i]) << "N " << N << " K " << K << " M " << M << " i " << i;
      std::vector<float> ya(M * N, 0.25f), refa(M * N, 0.25f);
      l.forward(x.data(), M, ya.data(), true);
      l.forward_reference(x.data(), M, refa.data(), true);
      for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(ya[i], refa[i]) << "accumulate, N " << N << " M " << M;
    }
  }
}

TEST(LinearQ8, DequantizeRowIsTheQ8_0Row) {
  const int64_t N = 5, K = 64;
  const auto w = randn(N * K, 3, 0.1f);
  const auto l = quant::LinearQ8::from_f32(w.data(), N, K);
  std::vector<uint8_t> blocks(ggml_row_bytes(GgmlType::kQ8_0, K) * N);
  quant::quantize(GgmlType::kQ8_0, w.data(), blocks.data(), N * K);
  std::vector<float> wdq(N * K), row(K);
  quant::dequantize(GgmlType::kQ8_0, blocks.data(), wdq.data(), N * K);
  for (int64_t n = 0; n < N; ++n) {
    l.dequantize_row(n, row.data());
    for (int64_t k = 0; k < K; ++k) ASSERT_EQ(row[k], wdq[n * K + k]);
  }
}

}  // namespace
}  // namespace dllm
