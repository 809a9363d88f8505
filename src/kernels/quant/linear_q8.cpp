#include "kernels/quant/linear_q8.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/profile.h"
#include "kernels/quant/quant.h"

namespace dllm::quant {

namespace {

// The lane sums of 8 vectors at once (7 vhaddps): out[i] = ((v_i0 + v_i1) + (v_i2 + v_i3)) + ((v_i4 + v_i5) +
// (v_i6 + v_i7)), in this order (the reference repeats it).
inline __m256 hsum8(const __m256 v[8]) {
  const __m256 q0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 q1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(q0, q1, 0x20), _mm256_permute2f128_ps(q0, q1, 0x31));
}

inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The micro-kernel: RM activation rows x RN weight rows over all K. Per block of 32 each weight block is loaded
// (and its |w| formed) once for the RM rows, each activation block once for the RN weight rows. Lane l of acc
// holds the sum over blocks of (int32 sum of elements 4l..4l+3) * (d_x * d_w), accumulated with one FMA per block.
template <int RM, int RN>
void tile(const int8_t* xq, const float* xd, const int8_t* wq, const float* wd, int64_t k, int64_t nb, float* y,
          int64_t ldy, bool accumulate) {
  __m256 acc[RM][RN];
#pragma GCC unroll 4
  for (int r = 0; r < RM; ++r)
#pragma GCC unroll 2
    for (int c = 0; c < RN; ++c) acc[r][c] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b) {
    __m256i w[RN], aw[RN];
#pragma GCC unroll 2
    for (int c = 0; c < RN; ++c) {
      w[c] = load32(wq + c * k + b * kQK8_0);
      aw[c] = _mm256_sign_epi8(w[c], w[c]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < RM; ++r) {
      const __m256i xv = load32(xq + r * k + b * kQK8_0);
      const __m256 dx = _mm256_broadcast_ss(xd + r * nb + b);
#pragma GCC unroll 2
      for (int c = 0; c < RN; ++c) {
        // |w| * sign(x, w) = w * x; pair sums of vpmaddubsw stay below 2 * 127 * 127 = 32258 (no saturation).
        const __m256i p16 = _mm256_maddubs_epi16(aw[c], _mm256_sign_epi8(xv, w[c]));
        const __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
        acc[r][c] = _mm256_fmadd_ps(s, _mm256_mul_ps(_mm256_broadcast_ss(wd + c * nb + b), dx), acc[r][c]);
      }
    }
  }
  __m256 all[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) all[i] = i < RM * RN ? acc[i / RN][i % RN] : _mm256_setzero_ps();
  alignas(32) float sums[8];
  _mm256_store_ps(sums, hsum8(all));
  for (int r = 0; r < RM; ++r)
    for (int c = 0; c < RN; ++c) {
      float& out = y[r * ldy + c];
      out = accumulate ? out + sums[r * RN + c] : sums[r * RN + c];
    }
}

using TileFn = void (*)(const int8_t*, const float*, const int8_t*, const float*, int64_t, int64_t, float*, int64_t,
                        bool);
constexpr int kRowTile = 4, kColTile = 2;  // kRowTile * kColTile <= 8 (hsum8)
constexpr TileFn kTiles[kRowTile][kColTile] = {
    {tile<1, 1>, tile<1, 2>}, {tile<2, 1>, tile<2, 2>}, {tile<3, 1>, tile<3, 2>}, {tile<4, 1>, tile<4, 2>}};

}  // namespace

// One row of activations to Q8_0, AVX2: the same amax, scale, 1/scale and round-to-nearest-even as the scalar
// quantize_activations_q8 (cvtps2dq rounds like lrintf in the default rounding mode), so the same bits.
void quantize_row_q8_avx2(const float* x, int64_t k, int8_t* qs, float* d) {
  const int64_t nb = k / kQK8_0;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQK8_0;
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xb + 8 * i);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                             _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float scale = amax / 127.0f, inv = scale != 0 ? 1.0f / scale : 0.0f;
    d[b] = scale;
    const __m256 iv = _mm256_set1_ps(inv);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], iv));
    // |q| <= 127: the saturating packs do not saturate. packs interleave 128-bit lanes; the permute undoes it.
    const __m256i q16 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * kQK8_0),
                        _mm256_permutevar8x32_epi32(q16, order));
  }
}

void quantize_activations_q8(const float* x, int64_t rows, int64_t k, int8_t* qs, float* d) {
  const int64_t nb = k / kQK8_0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + r * k + b * kQK8_0;
      float amax = 0;
      for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(xb[j]));
      // The scale is kept in f32 (ggml rounds it to f16; f32 is at least as accurate).
      const float scale = amax / 127.0f, inv = scale != 0 ? 1.0f / scale : 0.0f;
      d[r * nb + b] = scale;
      for (int j = 0; j < kQK8_0; ++j) qs[r * k + b * kQK8_0 + j] = static_cast<int8_t>(std::lrintf(xb[j] * inv));
    }
}

LinearQ8 LinearQ8::from_q8_0(const void* blocks, int64_t out, int64_t in) {
  if (in % kQK8_0 != 0) fail("LinearQ8: in_features ", in, " is not a multiple of 32");
  LinearQ8 l;
  l.out_ = out;
  l.in_ = in;
  l.nb_ = in / kQK8_0;
  l.qs_.resize(static_cast<size_t>(out * in));
  l.d_.resize(static_cast<size_t>(out * l.nb_));
  const auto* src = static_cast<const uint8_t*>(blocks);
  for (int64_t i = 0; i < out * l.nb_; ++i) {
    BlockQ8_0 b;
    std::memcpy(&b, src + i * sizeof(BlockQ8_0), sizeof(b));
    l.d_[i] = f16_to_f32(b.d);
    std::memcpy(l.qs_.data() + i * kQK8_0, b.qs, kQK8_0);
  }
  return l;
}

LinearQ8 LinearQ8::from_f32(const float* w, int64_t out, int64_t in) {
  if (in % kQK8_0 != 0) fail("LinearQ8: in_features ", in, " is not a multiple of 32");
  std::vector<uint8_t> blocks(ggml_row_bytes(GgmlType::kQ8_0, in) * static_cast<size_t>(out));
  quantize(GgmlType::kQ8_0, w, blocks.data(), out * in);
  return from_q8_0(blocks.data(), out, in);
}

void LinearQ8::dequantize_row(int64_t row, float* out) const {
  for (int64_t i = 0; i < in_; ++i) out[i] = d_[row * nb_ + i / kQK8_0] * static_cast<float>(qs_[row * in_ + i]);
}

void LinearQ8::forward_reference(const float* x, int64_t rows, float* y, bool accumulate) const {
  std::vector<int8_t> xq(static_cast<size_t>(rows * in_));
  std::vector<float> xd(static_cast<size_t>(rows * nb_));
  quantize_activations_q8(x, rows, in_, xq.data(), xd.data());
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t n = 0; n < out_; ++n) {
      float lane[8] = {};
      for (int64_t b = 0; b < nb_; ++b) {
        const float scale = d_[n * nb_ + b] * xd[m * nb_ + b];
        for (int l = 0; l < 8; ++l) {
          int32_t s = 0;
          for (int j = 4 * l; j < 4 * l + 4; ++j)
            s += int32_t{qs_[n * in_ + b * kQK8_0 + j]} * int32_t{xq[m * in_ + b * kQK8_0 + j]};
          lane[l] = std::fma(static_cast<float>(s), scale, lane[l]);
        }
      }
      const float h = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
      float& out = y[m * out_ + n];
      out = accumulate ? out + h : h;
    }
}

void LinearQ8::forward(const float* x, int64_t rows, float* y, bool accumulate) const {
  if (rows <= 0) return;
  ScopedKernelTimer timer(KernelKind::kMatmul);
  std::vector<int8_t> xq(static_cast<size_t>(rows * in_));
  std::vector<float> xd(static_cast<size_t>(rows * nb_));
  // Rows of x in blocks whose 8-bit copy stays in L2 (~192 KiB) while every weight row passes over them once;
  // inside a block, work items of 16 weight rows (L1/L2) run every 4-row tile of the block against them. Items
  // are handed out dynamically: on a machine shared with other work, a descheduled thread does not hold up the
  // rest (each output is still computed by one thread, in a fixed order: the same bits for any thread count).
  constexpr int64_t kColChunk = 16;
  const int64_t row_block = std::max<int64_t>(kRowTile, (192 * 1024 / in_) / kRowTile * kRowTile);
  const int64_t chunks = (out_ + kColChunk - 1) / kColChunk, blocks = (rows + row_block - 1) / row_block;
#pragma omp parallel if (static_cast<double>(rows) * out_ * in_ >= 1 << 18)
  {
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) quantize_row_q8_avx2(x + r * in_, in_, xq.data() + r * in_, xd.data() + r * nb_);
#pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < blocks * chunks; ++item) {
      const int64_t mb = item / chunks * row_block, mb_end = std::min(rows, mb + row_block);
      const int64_t n0 = item % chunks * kColChunk, n1 = std::min(out_, n0 + kColChunk);
      for (int64_t m0 = mb; m0 < mb_end; m0 += kRowTile) {
        const int64_t mt = std::min<int64_t>(kRowTile, mb_end - m0);
        for (int64_t n = n0; n < n1; n += kColTile) {
          const int64_t nt = std::min<int64_t>(kColTile, n1 - n);
          kTiles[mt - 1][nt - 1](xq.data() + m0 * in_, xd.data() + m0 * nb_, qs_.data() + n * in_,
                                 d_.data() + n * nb_, in_, nb_, y + m0 * out_ + n, out_, accumulate);
        }
      }
    }
  }
}

}  // namespace dllm::quant
