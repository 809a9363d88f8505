// Every fast kernel against its scalar reference (src/kernels/ref), with a tolerance per compute type.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "core/dtype.h"
#include "kernels/gemm_small_m.h"
#include "kernels/gemv_bf16.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "kernels/ref/reference.h"
#include "test_util.h"

namespace dllm {
namespace {

std::vector<float> random_values(size_t n, float scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

using test::max_relative_error;

struct MatmulCase {
  int64_t m, n, k;
};

class LinearTest : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(LinearTest, F32MatchesReference) {
  const auto [m, n, k] = GetParam();
  auto x = random_values(m * k, 1.0f, 1), w = random_values(n * k, 0.05f, 2);
  std::vector<float> want(m * n), got(m * n);
  ref::matmul(x.data(), w.data(), m, n, k, want.data());
  Linear lin(w.data(), DType::kF32, n, k, ComputeType::kF32);
  lin.forward(x.data(), m, got.data());
  EXPECT_LT(max_relative_error(got, want), 1e-5f);
}

TEST_P(LinearTest, AccumulateAddsToOutput) {
  const auto [m, n, k] = GetParam();
  auto x = random_values(m * k, 1.0f, 3), w = random_values(n * k, 0.05f, 4),
       base = random_values(m * n, 1.0f, 5);
  std::vector<float> want(m * n), got = base;
  ref::matmul(x.data(), w.data(), m, n, k, want.data());
  for (size_t i = 0; i < want.size(); ++i) want[i] += base[i];
  Linear lin(w.data(), DType::kF32, n, k, ComputeType::kF32);
  lin.forward(x.data(), m, got.data(), /*accumulate=*/true);
  EXPECT_LT(max_relative_error(got, want), 1e-5f);
}

// A weight multiplied where it lies (a mapped file): nothing copied (the product reads the caller's buffer,
// so changing it changes the result), within the reference tolerance, and the same bits as the copied weight.
TEST_P(LinearTest, F32InPlaceReadsTheBufferAndGivesTheCopiedWeightsBits) {
  const auto [m, n, k] = GetParam();
  auto x = random_values(m * k, 1.0f, 6);
  auto w = std::make_shared<std::vector<float>>(random_values(n * k, 0.05f, 7));
  std::vector<float> want(m * n), copied(m * n), got(m * n);
  ref::matmul(x.data(), w->data(), m, n, k, want.data());
  Linear copy(w->data(), DType::kF32, n, k, ComputeType::kF32);
  copy.forward(x.data(), m, copied.data());
  const Linear lin = Linear::in_place(w->data(), DType::kF32, n, k, ComputeType::kF32, w);
  EXPECT_TRUE(lin.weight_in_place());
  EXPECT_EQ(lin.weight_bytes(), static_cast<size_t>(n * k) * sizeof(float));
  lin.forward(x.data(), m, got.data());
  EXPECT_LT(max_relative_error(got, want), 1e-5f);
  EXPECT_EQ(got, copied) << "the in-place weight must give the copied weight's bits";
  for (auto& v : *w) v *= 2;
  lin.forward(x.data(), m, got.data());
  for (size_t i = 0; i < want.size(); ++i) want[i] *= 2;
  EXPECT_LT(max_relative_error(got, want), 1e-5f) << "the product must read the buffer it was given";
}

TEST_P(LinearTest, Bf16StoredWeights) {
  const auto [m, n, k] = GetParam();
  auto x = random_values(m * k, 1.0f, 6), w = random_values(n * k, 0.05f, 7);
  std::vector<uint16_t> w_bf16(w.size());
  convert_f32_to_bf16(w.data(), w_bf16.data(), w.size());
  std::vector<float> w_rounded(w.size());
  convert_to_f32(DType::kBF16, w_bf16.data(), w_rounded.data(), w.size());
  std::vector<float> want(m * n), got(m * n);
  ref::matmul(x.data(), w_rounded.data(), m, n, k, want.data());
  // BF16 storage with f32 compute: the upcast is exact, so f32 tolerance.
  Linear exact(w_bf16.data(), DType::kBF16, n, k, ComputeType::kF32);
  exact.forward(x.data(), m, got.data());
  EXPECT_LT(max_relative_error(got, want), 1e-5f);
}

// The bf16 compute path rounds activations to bf16 too (8-bit mantissa): ~2^-8 relative per product,
// averaging out over k terms. It exists only on CPUs with a bf16 matmul; elsewhere kBF16 runs in f32 (tested
// above).
TEST_P(LinearTest, Bf16FastPath) {
  if (!bf16_matmul_supported())
    GTEST_SKIP()
        << "no bf16 matmul here (the CPU lacks AVX512_BF16 / AMX, or ONEDNN_MAX_CPU_ISA excludes them): "
           "no fast path to test";
  const auto [m, n, k] = GetParam();
  auto x = random_values(m * k, 1.0f, 6), w = random_values(n * k, 0.05f, 7);
  std::vector<uint16_t> w_bf16(w.size());
  convert_f32_to_bf16(w.data(), w_bf16.data(), w.size());
  std::vector<float> w_rounded(w.size());
  convert_to_f32(DType::kBF16, w_bf16.data(), w_rounded.data(), w.size());
  std::vector<float> want(m * n), got(m * n);
  ref::matmul(x.data(), w_rounded.data(), m, n, k, want.data());
  Linear fast(w_bf16.data(), DType::kBF16, n, k, ComputeType::kBF16);
  fast.forward(x.data(), m, got.data());
  EXPECT_LT(max_relative_error(got, want), 2e-2f);
}

TEST_P(LinearTest, F16StoredWeights) {
  const auto [m, n, k] = GetParam();
  auto x = random_values(m * k, 1.0f, 8), w = random_values(n * k, 0.05f, 9);
  std::vector<uint16_t> w_f16(w.size());
  for (size_t i = 0; i < w.size(); ++i) w_f16[i] = f32_to_f16(w[i]);
  std::vector<float> w_rounded(w.size());
  convert_to_f32(DType::kF16, w_f16.data(), w_rounded.data(), w.size());
  std::vector<float> want(m * n), got(m * n);
  ref::matmul(x.data(), w_rounded.data(), m, n, k, want.data());
  Linear lin(w_f16.data(), DType::kF16, n, k, ComputeType::kF32);
  lin.forward(x.data(), m, got.data());
  EXPECT_LT(max_relative_error(got, want), 1e-5f);
}

// F16 weights for bf16 products are rounded to bf16 at load (straight, not through an f32 copy): the product
// must be bit for bit that of the same weights given as bf16 (f16 -> f32 is exact, then round to nearest
// even).
TEST_P(LinearTest, F16WeightsForBf16ProductsRoundLikeBf16Weights) {
  const auto [m, n, k] = GetParam();
  auto x = random_values(m * k, 1.0f, 10), w = random_values(n * k, 0.05f, 11);
  std::vector<uint16_t> w_f16(w.size()), w_bf16(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w_f16[i] = f32_to_f16(w[i]);
    w_bf16[i] = f32_to_bf16(f16_to_f32(w_f16[i]));
  }
  std::vector<float> from_f16(m * n), from_bf16(m * n);
  Linear(w_f16.data(), DType::kF16, n, k, ComputeType::kBF16).forward(x.data(), m, from_f16.data());
  Linear(w_bf16.data(), DType::kBF16, n, k, ComputeType::kBF16).forward(x.data(), m, from_bf16.data());
  EXPECT_EQ(from_f16, from_bf16);
}

// The f16 compute type multiplies the f16 weights as they are, with f32 activations and products: the f32
// tolerance against the reference on the f16 values (rounding them to bf16 would miss it by ~100x), few rows
// (gemm_small_m) and many (widened panels) alike, copied or in place, overwriting or accumulating.
TEST_P(LinearTest, F16ComputeKeepsTheF16Weights) {
  const auto [m, n, k] = GetParam();
  auto x = random_values(m * k, 1.0f, 12), base = random_values(m * n, 1.0f, 13);
  auto w = random_values(n * k, 0.05f, 14);
  auto w_f16 = std::make_shared<std::vector<uint16_t>>(w.size());
  for (size_t i = 0; i < w.size(); ++i) (*w_f16)[i] = f32_to_f16(w[i]);
  std::vector<float> w_values(w.size());
  convert_to_f32(DType::kF16, w_f16->data(), w_values.data(), w.size());
  std::vector<float> want(m * n), got(m * n);
  ref::matmul(x.data(), w_values.data(), m, n, k, want.data());
  const Linear copy(w_f16->data(), DType::kF16, n, k, ComputeType::kF16);
  EXPECT_EQ(copy.weight_storage(), DType::kF16);
  EXPECT_GE(copy.weight_bytes(), static_cast<size_t>(n * k) * 2);  // 2 bytes a weight (blocks: padded)
  EXPECT_LT(copy.weight_bytes(), static_cast<size_t>((n + 64) * (k + 16)) * 2);
  copy.forward(x.data(), m, got.data());
  EXPECT_LT(max_relative_error(got, want), 1e-5f);
  // From f32 rows: rounded to the same f16 values, the same bits.
  std::vector<float> from_f32(m * n);
  Linear(w.data(), DType::kF32, n, k, ComputeType::kF16).forward(x.data(), m, from_f32.data());
  EXPECT_EQ(from_f32, got);
  // In place: the caller's buffer (as rows until prepare() moves them into the copy's layout, then the copy's
  // bits); accumulating adds the product.
  const Linear mapped = Linear::in_place(w_f16->data(), DType::kF16, n, k, ComputeType::kF16, w_f16);
  EXPECT_TRUE(mapped.weight_in_place());
  std::vector<float> got_mapped(m * n), acc = base;
  mapped.forward(x.data(), m, got_mapped.data());
  EXPECT_LT(max_relative_error(got_mapped, want), 1e-5f);
  mapped.prepare();
  mapped.forward(x.data(), m, got_mapped.data());
  EXPECT_EQ(got_mapped, got);
  mapped.forward(x.data(), m, acc.data(), /*accumulate=*/true);
  for (size_t i = 0; i < want.size(); ++i) want[i] += base[i];
  EXPECT_LT(max_relative_error(acc, want), 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearTest,
                         ::testing::Values(MatmulCase{1, 64, 128}, MatmulCase{7, 33, 65},
                                           MatmulCase{32, 384, 128}, MatmulCase{300, 96, 256}));

// Weights in each storage type, widened exactly: the reference multiplies the widened values.
struct StoredWeights {
  std::vector<uint16_t> bits;  // bf16 / f16
  std::vector<float> values;   // what the kernel must multiply by
  const void* data(DType t, const std::vector<float>& f32) const {
    return t == DType::kF32 ? static_cast<const void*>(f32.data()) : bits.data();
  }
};

StoredWeights store_as(DType t, const std::vector<float>& w) {
  StoredWeights s;
  s.values = w;
  if (t == DType::kF32) return s;
  s.bits.resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) s.bits[i] = t == DType::kBF16 ? f32_to_bf16(w[i]) : f32_to_f16(w[i]);
  convert_to_f32(t, s.bits.data(), s.values.data(), w.size());
  return s;
}

// The small-row kernel over ragged shapes (n not a multiple of its 4-row strips, k not a multiple of 8 or of
// its K-block), every row count it takes, every storage type, with and without accumulation.
TEST(Kernels, SmallRowGemmMatchesReference) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 15, 16, 33, 40}) {
      for (auto [n, k] : {std::pair<int64_t, int64_t>{7, 13}, {64, 1100}, {37, 520}}) {
        auto x = random_values(m * k, 1.0f, 20 + m), w = random_values(n * k, 0.05f, 21 + n);
        const StoredWeights sw = store_as(t, w);
        std::vector<float> want(m * n), got(m * n, 0.0f);
        ref::matmul(x.data(), sw.values.data(), m, n, k, want.data());
        gemm_small_m(x.data(), m, sw.data(t, w), t, n, k, got.data(), false);
        EXPECT_LT(max_relative_error(got, want), 1e-5f)
            << dtype_name(t) << " m=" << m << " n=" << n << " k=" << k;
        auto base = random_values(m * n, 1.0f, 22);
        got = base;
        for (size_t i = 0; i < want.size(); ++i) want[i] += base[i];
        gemm_small_m(x.data(), m, sw.data(t, w), t, n, k, got.data(), true);
        EXPECT_LT(max_relative_error(got, want), 1e-5f) << "accumulate " << dtype_name(t) << " m=" << m;
      }
    }
  }
}

// oneDNN's BA16a64b2a layout written out by hand, from the row-major [n, k] bf16 weight: for each block of 64
// columns, each block of 32 k, 16 k-pairs x 64 columns x 2; padding (k to 32, n to 64) is zero.
std::vector<uint16_t> pack_ba16a64b2a(const std::vector<uint16_t>& w, int64_t n, int64_t k,
                                      int64_t k_padded) {
  const int64_t n_padded = (n + 63) / 64 * 64;
  std::vector<uint16_t> out(static_cast<size_t>(n_padded * k_padded), 0);
  size_t o = 0;
  for (int64_t nb = 0; nb < n_padded; nb += 64)
    for (int64_t kb = 0; kb < k_padded; kb += 32)
      for (int64_t p = 0; p < 16; ++p)
        for (int64_t c = 0; c < 64; ++c)
          for (int64_t e = 0; e < 2; ++e, ++o) {
            const int64_t row = nb + c, col = kb + 2 * p + e;
            if (row < n && col < k) out[o] = w[row * k + col];
          }
  return out;
}

// The few-row bf16 kernel: products of bf16-rounded activations and weights, summed in f32, so it must match
// the f32 reference on the rounded values to f32 accuracy. Ragged shapes (n not a multiple of 64, k not of
// 32), each row count, with and without accumulation; directly on a hand-packed weight, then through Linear,
// whose oneDNN-reordered buffer it reads.
TEST(Kernels, Bf16GemvOnBlockedWeightsMatchesReference) {
  if (!gemv_bf16_blocked_supported())
    GTEST_SKIP()
        << "this CPU has no AVX512_BF16: the few-row bf16 kernel cannot run (oneDNN does those rows)";
  int linear_cases_on_gemv = 0;
  for (auto [n, k] : {std::pair<int64_t, int64_t>{64, 32}, {33, 65}, {130, 200}, {896, 896}, {128, 4864}}) {
    const int64_t k_padded = (k + 31) / 32 * 32;
    auto w = random_values(n * k, 0.05f, 40 + n);
    const StoredWeights sw = store_as(DType::kBF16, w);
    const std::vector<uint16_t> packed = pack_ba16a64b2a(sw.bits, n, k, k_padded);
    const Linear lin(sw.bits.data(), DType::kBF16, n, k, ComputeType::kBF16);
    linear_cases_on_gemv += lin.few_rows_on_gemv();
    for (int64_t m = 1; m <= kGemvBf16MaxRows + 1; ++m) {
      const auto x = random_values(m * k, 1.0f, 41 + m);
      std::vector<uint16_t> xb(static_cast<size_t>(m * k_padded), 0);
      std::vector<float> x_rounded(x.size());
      for (int64_t r = 0; r < m; ++r)
        for (int64_t i = 0; i < k; ++i) {
          xb[r * k_padded + i] = f32_to_bf16(x[r * k + i]);
          x_rounded[r * k + i] = bf16_to_f32(xb[r * k_padded + i]);
        }
      std::vector<float> want(m * n);
      ref::matmul(x_rounded.data(), sw.values.data(), m, n, k, want.data());
      const auto base = random_values(m * n, 1.0f, 42);
      std::vector<float> want_sum = want;
      for (size_t i = 0; i < want.size(); ++i) want_sum[i] += base[i];
      for (bool accumulate : {false, true}) {
        const std::string where = "n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                  " m=" + std::to_string(m) + (accumulate ? " accumulate" : "");
        const std::vector<float>& expected = accumulate ? want_sum : want;
        if (m <= kGemvBf16MaxRows) {
          std::vector<float> got = accumulate ? base : std::vector<float>(m * n, 7.0f);
          gemv_bf16_blocked(xb.data(), m, packed.data(), n, k_padded, got.data(), accumulate);
          EXPECT_LT(max_relative_error(got, expected), 1e-5f) << "kernel " << where;
        }
        std::vector<float> got = accumulate ? base : std::vector<float>(m * n, 7.0f);
        lin.forward(x.data(), m, got.data(), accumulate);
        EXPECT_LT(max_relative_error(got, expected), 1e-5f) << "Linear " << where;
      }
    }
  }
  // oneDNN picks BA16a64b2a for the model-sized shapes at least; the kernel must have served them.
  EXPECT_GE(linear_cases_on_gemv, 2);
}

// 16-bit weights with many rows go through sgemm one widened panel at a time: a K this large makes the panel
// 64 rows, so n = 150 needs three panels, the last one partial.
TEST(Kernels, Bf16WeightsManyRowsAcrossPanels) {
  const int64_t m = kSmallMaxRows + 8, n = 150, k = 65536;
  auto x = random_values(m * k, 1.0f, 30), w = random_values(n * k, 0.05f, 31);
  const StoredWeights sw = store_as(DType::kBF16, w);
  std::vector<float> want(m * n), got(m * n);
  ref::matmul(x.data(), sw.values.data(), m, n, k, want.data());
  Linear lin(sw.bits.data(), DType::kBF16, n, k, ComputeType::kBF16);
  lin.forward(x.data(), m, got.data());
  const float tol = bf16_matmul_supported() ? 2e-2f : 1e-5f;  // bf16 activations only with bf16 hardware
  EXPECT_LT(max_relative_error(got, want), tol);
  if (!bf16_matmul_supported()) {  // the weights stay 16-bit: half the memory of f32
    EXPECT_EQ(lin.weight_storage(), DType::kBF16);
    EXPECT_EQ(lin.weight_bytes(), static_cast<size_t>(n * k) * 2);
  }
}

// Many rows on f16 weights run on panels of rows widened to f32: several whole panels and a ragged last one,
// overwriting and accumulating, against the reference on the f16 values.
TEST(Kernels, F16WeightsManyRowsAcrossPanels) {
  const int64_t m = 72, n = 2500, k = 200;  // panels of 1296 rows at k = 200: one whole, one ragged
  auto x = random_values(m * k, 1.0f, 30), base = random_values(m * n, 1.0f, 31);
  const StoredWeights sw = store_as(DType::kF16, random_values(n * k, 0.05f, 32));
  Linear lin(sw.bits.data(), DType::kF16, n, k, ComputeType::kF16);
  std::vector<float> want(m * n), got(m * n), acc = base;
  ref::matmul(x.data(), sw.values.data(), m, n, k, want.data());
  lin.forward(x.data(), m, got.data());
  EXPECT_LT(max_relative_error(got, want), 1e-5f);
  lin.forward(x.data(), m, acc.data(), /*accumulate=*/true);
  for (size_t i = 0; i < want.size(); ++i) want[i] += base[i];
  EXPECT_LT(max_relative_error(acc, want), 1e-5f);
}

// prepare() moving in-place f16 rows into blocks while forwards run on them, the rows owned by nothing but the
// Linear (as rows a loader moved into a buffer of its own): every product stays right, and none reads freed rows
// (the ASan build's check; it caught exactly that in a generate under load).
TEST(Kernels, F16PrepareWhileForwardsRunKeepsTheRowsAlive) {
  const int64_t m = 48, n = 640, k = 256;
  const StoredWeights sw = store_as(DType::kF16, random_values(n * k, 0.05f, 60));
  const auto x = random_values(m * k, 1.0f, 61);
  std::vector<float> want(m * n);
  ref::matmul(x.data(), sw.values.data(), m, n, k, want.data());
  for (int round = 0; round < 3; ++round) {
    auto rows = std::make_shared<std::vector<uint16_t>>(sw.bits);
    const Linear lin = Linear::in_place(rows->data(), DType::kF16, n, k, ComputeType::kF16, rows);
    rows.reset();  // the Linear is the rows' only owner now
    std::thread preparer([&] { lin.prepare(); });
    for (int i = 0; i < 4; ++i) {
      std::vector<float> got(m * n);
      lin.forward(x.data(), m, got.data());
      EXPECT_LT(max_relative_error(got, want), 1e-5f) << "round " << round << ", forward " << i;
    }
    preparer.join();
  }
}

// A token's product split over the threads of a region (Linear::forward_share on f16 weights): the reference's
// values, and every split gives forward's bits, with and without accumulation, for ragged N and K (K = 136 is
// padded to 144 in the blocked layout).
TEST(Kernels, F16ShareGivesForwardsBits) {
  const int64_t n = 301, k = 136;
  const StoredWeights sw = store_as(DType::kF16, random_values(n * k, 0.05f, 40));
  Linear lin(sw.bits.data(), DType::kF16, n, k, ComputeType::kF16);
  ASSERT_TRUE(lin.few_rows_on_gemv());
  for (int64_t rows = 1; rows <= 4; ++rows) {
    auto x = random_values(rows * k, 1.0f, 41 + rows), base = random_values(rows * n, 1.0f, 50 + rows);
    std::vector<float> exact(rows * n), got_one(rows * n);
    ref::matmul(x.data(), sw.values.data(), rows, n, k, exact.data());
    lin.forward(x.data(), rows, got_one.data());
    EXPECT_LT(max_relative_error(got_one, exact), 1e-5f) << rows << " rows";
    for (bool accumulate : {false, true}) {
      std::vector<float> want = base;
      lin.forward(x.data(), rows, want.data(), accumulate);
      for (int threads = 1; threads <= 3; ++threads) {
        std::vector<float> got = base;
        for (int t = 0; t < threads; ++t) lin.forward_share(x.data(), rows, got.data(), accumulate, t, threads);
        EXPECT_EQ(got, want) << rows << " rows, " << threads << " threads, accumulate " << accumulate;
      }
    }
  }
}

TEST(Kernels, RmsNormMatchesReference) {
  const int64_t rows = 5, dim = 257;
  auto x = random_values(rows * dim, 3.0f, 10), w = random_values(dim, 1.0f, 11);
  std::vector<float> want(x.size()), got(x.size());
  ref::rms_norm(x.data(), w.data(), rows, dim, 1e-5f, want.data());
  rms_norm(x.data(), w.data(), rows, dim, 1e-5f, got.data());
  EXPECT_LT(max_relative_error(got, want), 1e-6f);
}

TEST(Kernels, RopeMatchesReference) {
  const int64_t rows = 40, heads = 3, hd = 32;
  auto x = random_values(rows * heads * hd, 1.0f, 12);
  std::vector<int64_t> pos(rows);
  for (int64_t i = 0; i < rows; ++i) pos[i] = (i * 37) % 300;
  auto want = x, got = x;
  ref::rope_neox(want.data(), rows, heads, hd, pos.data(), 500000.0);
  RopeTable table(hd, 500000.0f, 16);  // grows on demand
  table.ensure(300);
  rope_neox(got.data(), rows, heads, pos.data(), table);
  // f32 angles (as the reference models compute them) vs double: |pos * inv_freq| up to 300 rad.
  EXPECT_LT(max_relative_error(got, want), 1e-4f);
}

// Partial RoPE (LLaDA2: rotary_dim = head_dim / 2): the first 16 of 32 values rotate with frequencies over 16,
// the other 16 pass unchanged.
TEST(Kernels, PartialRopeMatchesReference) {
  const int64_t rows = 20, heads = 3, hd = 32, rot = 16;
  auto x = random_values(rows * heads * hd, 1.0f, 21);
  std::vector<int64_t> pos(rows);
  for (int64_t i = 0; i < rows; ++i) pos[i] = (i * 53) % 200;
  auto want = x, got = x;
  ref::rope_neox(want.data(), rows, heads, hd, pos.data(), 600000.0, rot);
  RopeTable table(rot, 600000.0f, 200);
  rope_neox(got.data(), rows, heads, pos.data(), table, hd);
  EXPECT_LT(max_relative_error(got, want), 1e-4f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t t = rot; t < hd; ++t) ASSERT_EQ(got[(r * heads + h) * hd + t], x[(r * heads + h) * hd + t]);
  EXPECT_NE(got[heads * hd + 1], x[heads * hd + 1]);  // the rotated part of row 1 (position 53) moved
}

struct AttentionCase {
  int64_t batch, q_len, kv_len, heads, kv_heads, hd;
  bool masked;
  int64_t block = 0, q_offset = 0;  // block-causal rule
};

class AttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionTest, MatchesReference) {
  const auto c = GetParam();
  auto q = random_values(c.batch * c.q_len * c.heads * c.hd, 1.0f, 13);
  auto k = random_values(c.batch * c.kv_len * c.kv_heads * c.hd, 1.0f, 14);
  auto v = random_values(c.batch * c.kv_len * c.kv_heads * c.hd, 1.0f, 15);
  std::vector<uint8_t> valid(c.batch * c.kv_len, 1);
  if (c.masked) {
    for (int64_t j = 0; j < c.kv_len; j += 3) valid[j] = 0;
    for (int64_t j = 0; j < c.kv_len; ++j)
      valid[(c.batch - 1) * c.kv_len + j] = 0;  // a row with no valid key
  }
  std::vector<float> want(q.size()), got(q.size());
  const uint8_t* mask = c.masked ? valid.data() : nullptr;
  ref::attention(q.data(), k.data(), v.data(), c.batch, c.q_len, c.kv_len, c.heads, c.kv_heads, c.hd, mask,
                 want.data(), c.block, c.q_offset);
  attention(q.data(), k.data(), v.data(), c.batch, c.q_len, c.kv_len, c.heads, c.kv_heads, c.hd, mask,
            got.data(), c.block, c.q_offset);
  EXPECT_LT(max_relative_error(got, want), 2e-6f);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(AttentionCase{1, 12, 12, 4, 4, 32, false},
                                           AttentionCase{2, 9, 20, 4, 2, 32, false},   // GQA, q_len != kv_len
                                           AttentionCase{2, 16, 16, 8, 1, 64, true},   // MQA + key mask
                                           AttentionCase{1, 5, 7, 2, 2, 12, false},    // head_dim not /8
                                           // block-causal: whole sequence, block 4, partial last block
                                           AttentionCase{2, 18, 18, 4, 2, 32, false, 4, 0},
                                           // a block of 8 queries after 16 cached keys (the block cache)
                                           AttentionCase{1, 8, 24, 4, 2, 32, false, 8, 16},
                                           // more queries than a query block (256), block 32, with a key mask
                                           AttentionCase{1, 300, 300, 2, 1, 16, true, 32, 0}));

// The rule itself, against the materialised matrix generate() builds (tril(ones(nb, nb)) repeated B times).
TEST(Kernels, BlockCausalRuleIsTheReferenceMatrix) {
  const int64_t block = 8, len = 40;
  for (int64_t i = 0; i < len; ++i)
    for (int64_t j = 0; j < len; ++j) {
      const bool attend = (j / block) <= (i / block);  // tril over block indices
      EXPECT_EQ(j < visible_keys(i, block, len), attend) << i << "," << j;
    }
  EXPECT_EQ(visible_keys(5, 0, 17), 17);
  EXPECT_EQ(visible_keys(37, 8, 38), 38);
}

TEST(Kernels, SiluMulMatchesReference) {
  auto g = random_values(10001, 4.0f, 16), u = random_values(10001, 1.0f, 17);
  g[0] = -100.0f;
  g[1] = 100.0f;
  std::vector<float> want(g.size()), got(g.size());
  ref::silu_mul(g.data(), u.data(), static_cast<int64_t>(g.size()), want.data());
  silu_mul(g.data(), u.data(), static_cast<int64_t>(g.size()), got.data());
  EXPECT_LT(max_relative_error(got, want), 1e-6f);
}

TEST(Kernels, Bf16RoundingIsNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between two bf16 values: rounds to the even one (1.0).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);  // halfway, rounds up to even
  EXPECT_EQ(bf16_to_f32(0x3f82), 1.015625f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

}  // namespace
}  // namespace dllm
