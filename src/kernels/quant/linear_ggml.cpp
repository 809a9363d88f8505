#include "kernels/quant/linear_ggml.h"

#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/amx.h"
#include "kernels/profile.h"
#include "kernels/quant/linear_q8.h"
#include "kernels/quant/quant.h"

namespace dllm::quant {

namespace {

// What one forward hands its micro-kernels: W (n rows of row_bytes), the quantised activations (m rows of k),
// y.
struct DotArgs {
  const uint8_t* w;
  size_t row_bytes;
  int64_t k, m;
  const int8_t* xq;
  const float* xd;
  const int16_t* xs;  // Q8_K only: sums of 32
  float* y;
  int64_t ldy;
  bool accumulate;
};

namespace avx2 {
#define DLLM_GGML_VNNI 0
#include "kernels/quant/linear_ggml_tiles.inc"
#undef DLLM_GGML_VNNI
}  // namespace avx2

// The same tiles with AVX512_VNNI's fused multiply-adds (EVEX on 256-bit registers). Only called where cpuid
// says the CPU has AVX512F/BW/VL/VNNI. Internal linkage (anonymous namespace) and no library templates
// instantiated in here: nothing compiled for AVX-512 can be picked by the linker for code the AVX2 paths
// share.
// (clang, for the libFuzzer build, spells GCC's target pragma as an attribute pushed on every function.)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq")
#endif
namespace vnni {
#define DLLM_GGML_VNNI 1
#include "kernels/quant/linear_ggml_tiles.inc"
#undef DLLM_GGML_VNNI
}  // namespace vnni
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// The same 256-bit tiles with AVX-VNNI's VEX-encoded vpdpbusd / vpdpwssd: CPUs with AVX-VNNI and no AVX-512
// (Intel Alder Lake and later client parts) get fused int8 multiply-adds too. Same isolation as above.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
#endif
namespace avx_vnni {
#define DLLM_GGML_VNNI 2
#include "kernels/quant/linear_ggml_tiles.inc"
#undef DLLM_GGML_VNNI
}  // namespace avx_vnni
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

using RowsFn = void (*)(const DotArgs&, int64_t, int64_t);

// One row of activations to Q8_K, AVX2: the same bits as quantize_activations_q8_k (the first element of
// largest magnitude gives the scale, cvtps2dq rounds like lrintf).
void quantize_row_q8_k_avx2(const float* x, int64_t k, int8_t* qs, float* d, int16_t* sums) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t sb = 0; sb < k / kQK_K; ++sb) {
    const float* xb = x + sb * kQK_K;
    int8_t* q = qs + sb * kQK_K;
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(xb + 8 * i), abs_mask));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    if (amax == 0) {
      d[sb] = 0;
      std::memset(q, 0, kQK_K);
      std::fill_n(sums + sb * 8, 8, int16_t{0});
      continue;
    }
    float max = 0;
    for (int i = 0; i < 32; ++i) {
      const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(xb + 8 * i), abs_mask),
                                                       _mm256_set1_ps(amax), _CMP_EQ_OQ));
      if (hit) {
        max = xb[8 * i + __builtin_ctz(static_cast<unsigned>(hit))];
        break;
      }
    }
    const float iscale = -127.f / max;
    d[sb] = 1 / iscale;
    const __m256 iv = _mm256_set1_ps(iscale);
    const __m256i top = _mm256_set1_epi32(127);
    for (int c = 0; c < 8; ++c) {
      __m256i v[4];
      for (int i = 0; i < 4; ++i)
        v[i] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 32 * c + 8 * i), iv)),
                                top);
      const __m256i q16 = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * c), _mm256_permutevar8x32_epi32(q16, order));
      const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3]));
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
      s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
      sums[sb * 8 + c] = static_cast<int16_t>(_mm_cvtsi128_si32(s4));
    }
  }
}

// Grows only: after the first calls of a shape, a forward allocates nothing.
template <class T>
T* scratch(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}
struct Scratch {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int16_t> s;
};
thread_local Scratch tls_scratch;

// CPUID leaf 7, sub-leaf 1, EAX bit 4. Read directly: clang's __builtin_cpu_supports has no "avxvnni".
bool cpu_has_avx_vnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  return (eax >> 4) & 1u;
}

// The fastest set this CPU runs, or the one DLLM_GGML_KERNEL names (avx2, avx_vnni, avx512_vnni, amx): for
// measuring one set against another on the same machine. A name this CPU cannot run, or an unknown name,
// is an error rather than a silent fallback.
LinearGgml::Kernel detect_best() {
  using K = LinearGgml::Kernel;
  if (const char* env = std::getenv("DLLM_GGML_KERNEL"); env && *env) {
    const std::string_view name(env);
    const K k = name == "avx2"          ? K::kAvx2
                : name == "avx_vnni"    ? K::kAvxVnni
                : name == "avx512_vnni" ? K::kAvx512Vnni
                : name == "amx"         ? K::kAmx
                                        : K::kAuto;
    if (k == K::kAuto)
      fail("DLLM_GGML_KERNEL=", name, ": unknown kernel set (avx2, avx_vnni, avx512_vnni or amx)");
    if (!LinearGgml::supported(k))
      fail("DLLM_GGML_KERNEL=", name, ": this CPU cannot run the ", LinearGgml::kernel_name(k),
           " kernels (they need ", LinearGgml::kernel_requirement(k), ")");
    return k;
  }
  if (LinearGgml::supported(K::kAmx)) return K::kAmx;
  if (LinearGgml::supported(K::kAvx512Vnni)) return K::kAvx512Vnni;
  if (LinearGgml::supported(K::kAvxVnni)) return K::kAvxVnni;
  return K::kAvx2;
}

void check_shape(GgmlType type, int64_t rows, int64_t cols) {
  if (type != GgmlType::kQ8_0 && type != GgmlType::kQ4_0 && type != GgmlType::kQ4_K &&
      type != GgmlType::kQ6_K)
    fail("LinearGgml: ggml type ", ggml_type_name(static_cast<uint32_t>(type)), " (",
         static_cast<uint32_t>(type), ") is not run in place (Q8_0, Q4_0, Q4_K and Q6_K are)");
  const int64_t block = type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 ? kQK8_0 : kQK_K;
  if (rows < 0 || cols <= 0 || cols % block != 0)
    fail("LinearGgml: a ", rows, " x ", cols, " ", ggml_type_name(static_cast<uint32_t>(type)),
         " matrix needs rows of a multiple of ", block, " elements");
}

}  // namespace

void quantize_activations_q8_k(const float* x, int64_t rows, int64_t k, int8_t* qs, float* d, int16_t* sums) {
  const int64_t nsb = k / kQK_K;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const float* xb = x + r * k + sb * kQK_K;
      int8_t* q = qs + r * k + sb * kQK_K;
      float amax = 0,
            max = 0;  // the first element of largest magnitude, sign kept (ggml's quantize_row_q8_K)
      for (int j = 0; j < kQK_K; ++j)
        if (std::fabs(xb[j]) > amax) {
          amax = std::fabs(xb[j]);
          max = xb[j];
        }
      float& dd = d[r * nsb + sb];
      int16_t* s = sums + (r * nsb + sb) * 8;
      if (amax == 0) {
        dd = 0;
        std::fill_n(q, kQK_K, int8_t{0});
        std::fill_n(s, 8, int16_t{0});
        continue;
      }
      const float iscale = -127.f / max;
      for (int j = 0; j < kQK_K; ++j) q[j] = static_cast<int8_t>(std::min(127L, std::lrintf(iscale * xb[j])));
      for (int c = 0; c < 8; ++c) {
        int sum = 0;
        for (int j = 0; j < 32; ++j) sum += q[32 * c + j];
        s[c] = static_cast<int16_t>(sum);
      }
      dd = 1 / iscale;
    }
}

void quantize_row_q8_k(const float* x, int64_t k, int8_t* qs, float* d, int16_t* sums) {
  quantize_row_q8_k_avx2(x, k, qs, d, sums);
}

LinearGgml LinearGgml::view(GgmlType type, const void* data, int64_t rows, int64_t cols,
                            std::shared_ptr<const void> owner) {
  check_shape(type, rows, cols);
  if (!data && rows > 0) fail("LinearGgml: null data for a ", rows, " x ", cols, " matrix");
  LinearGgml l;
  l.type_ = type;
  l.data_ = static_cast<const uint8_t*>(data);
  l.rows_ = rows;
  l.cols_ = cols;
  l.row_bytes_ = ggml_row_bytes(type, cols);
  l.owned_ = std::move(owner);
  return l;
}

LinearGgml LinearGgml::quantize_f32(GgmlType type, const float* w, int64_t rows, int64_t cols) {
  check_shape(type, rows, cols);
  const size_t bytes = ggml_row_bytes(type, cols) * static_cast<size_t>(rows);
  std::shared_ptr<uint8_t[]> blocks(new uint8_t[std::max<size_t>(bytes, 1)]);
  quantize(type, w, blocks.get(), rows * cols);
  LinearGgml l = view(type, blocks.get(), rows, cols, blocks);
  l.owns_ = true;
  return l;
}

bool LinearGgml::supported(Kernel kernel) {
  static const bool avx512_vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  static const bool avx_vnni = cpu_has_avx_vnni();
  static const bool amx = avx512_vnni && __builtin_cpu_supports("avx512dq") && amx_int8_usable();
  switch (kernel) {
    case Kernel::kAvx512Vnni:
      return avx512_vnni;
    case Kernel::kAmx:
      return amx;
    case Kernel::kAvxVnni:
      return avx_vnni;
    default:
      return true;
  }
}

LinearGgml::Kernel LinearGgml::selected_set() {
  static const Kernel set = detect_best();
  return set;
}

LinearGgml::Kernel LinearGgml::best_kernel() {
  return selected_set() == Kernel::kAmx ? Kernel::kAvx512Vnni : selected_set();
}

const char* LinearGgml::kernel_name(Kernel kernel) {
  switch (kernel) {
    case Kernel::kAuto:
      return kernel_name(best_kernel());
    case Kernel::kAvx2:
      return "AVX2";
    case Kernel::kAvxVnni:
      return "AVX_VNNI";
    case Kernel::kAvx512Vnni:
      return "AVX512_VNNI";
    case Kernel::kAmx:
      return "AMX_INT8";
  }
  return "?";
}

const char* LinearGgml::kernel_requirement(Kernel kernel) {
  switch (kernel) {
    case Kernel::kAvxVnni:
      return "AVX-VNNI (cpuid leaf 7 sub-leaf 1, EAX bit 4)";
    case Kernel::kAvx512Vnni:
      return "AVX512F/BW/VL + AVX512_VNNI";
    case Kernel::kAmx:
      return "AMX-TILE + AMX-INT8 (cpuid leaf 7, EDX bits 24-25), AVX512_VNNI, and Linux >= 5.16 granting "
             "the "
             "tile data (arch_prctl ARCH_REQ_XCOMP_PERM)";
    default:
      return "AVX2 + FMA + F16C";
  }
}

void LinearGgml::forward(const float* x, int64_t rows, float* y, bool accumulate) const {
  forward(Kernel::kAuto, x, rows, y, accumulate);
}

void LinearGgml::forward(Kernel kernel, const float* x, int64_t rows, float* y, bool accumulate) const {
  const LinearGgml* one[1] = {this};
  float* out[1] = {y};
  forward_many(kernel, one, out, 1, x, rows, accumulate);
}

void LinearGgml::forward_shared_input(const LinearGgml& a, float* ya, const LinearGgml& b, float* yb,
                                      const float* x, int64_t rows) {
  if (a.type_ != b.type_ || a.cols_ != b.cols_) {
    a.forward(x, rows, ya);
    b.forward(x, rows, yb);
    return;
  }
  const LinearGgml* both[2] = {&a, &b};
  float* out[2] = {ya, yb};
  forward_many(Kernel::kAuto, both, out, 2, x, rows, false);
}

void LinearGgml::forward_many(Kernel kernel, const LinearGgml* const* ws, float* const* ys, int count,
                              const float* x, int64_t rows, bool accumulate) {
  const LinearGgml& first = *ws[0];
  if (rows <= 0) return;
  if (!supported(kernel)) fail("LinearGgml: this CPU cannot run the ", kernel_name(kernel), " kernel");
  if (kernel == Kernel::kAuto) kernel = best_kernel();
  ScopedKernelTimer timer(KernelKind::kMatmul);
  const int64_t cols = first.cols_;
  const bool q4 = first.type_ == GgmlType::kQ4_K, q6 = first.type_ == GgmlType::kQ6_K;
  const bool q8_k = q4 || q6;  // the k-quants take Q8_K activations (256 per block)
  const int64_t block = q8_k ? kQK_K : kQK8_0, nblk = cols / block;
  Scratch& s = tls_scratch;
  int8_t* xq = scratch(s.q, rows * cols);
  float* xd = scratch(s.d, rows * nblk);
  int16_t* xs = q8_k ? scratch(s.s, rows * nblk * 8) : nullptr;
  const bool q4_0 = first.type_ == GgmlType::kQ4_0;
  // [type: Q8_0, Q4_0, Q4_K, Q6_K][kernel set: AVX2, AVX-VNNI, AVX512_VNNI]
  static constexpr RowsFn kRows[4][3] = {{avx2::q8_0_rows, avx_vnni::q8_0_rows, vnni::q8_0_rows},
                                         {avx2::q4_0_rows, avx_vnni::q4_0_rows, vnni::q4_0_rows},
                                         {avx2::q4_k_rows, avx_vnni::q4_k_rows, vnni::q4_k_rows},
                                         {avx2::q6_k_rows, avx_vnni::q6_k_rows, vnni::q6_k_rows}};
  // AMX has no in-place tiles: the AVX512_VNNI ones run under it.
  const int set = kernel == Kernel::kAvx512Vnni || kernel == Kernel::kAmx ? 2
                  : kernel == Kernel::kAvxVnni                            ? 1
                                                                          : 0;
  const RowsFn run = kRows[q4 ? 2 : q6 ? 3 : q4_0 ? 1 : 0][set];
  // Work items of 16 weight rows (of each matrix in turn), handed out dynamically: on a machine shared with
  // other work a descheduled thread does not hold up the rest. Each output is computed by one thread in a
  // fixed order: the same bits for any thread count.
  constexpr int64_t kChunk = 16;
  int64_t first_item[3] = {0, 0, 0}, total_rows = 0;
  for (int i = 0; i < count; ++i) {
    first_item[i + 1] = first_item[i] + (ws[i]->rows_ + kChunk - 1) / kChunk;
    total_rows += ws[i]->rows_;
  }
  const int64_t items = first_item[count];
  if (items == 0) return;
  const auto quantize_row = [&](int64_t r) {
    if (q8_k)
      quantize_row_q8_k_avx2(x + r * cols, cols, xq + r * cols, xd + r * nblk, xs + r * nblk * 8);
    else
      quantize_row_q8_avx2(x + r * cols, cols, xq + r * cols, xd + r * nblk);
  };
  const auto run_item = [&](int64_t item) {
    const int i = item < first_item[1] ? 0 : 1;
    const LinearGgml& w = *ws[i];
    const DotArgs a{w.data_, w.row_bytes_, cols, rows, xq, xd, xs, ys[i], w.rows_, accumulate};
    const int64_t n0 = (item - first_item[i]) * kChunk;
    run(a, n0, std::min(w.rows_, n0 + kChunk));
  };
  // Inside a parallel region (the experts of a mixture, one per thread) the work stays on this thread without
  // opening a nested region (a team of one still costs a fork and a join per matmul) and without `omp for`,
  // which would bind to the enclosing team.
  if (omp_in_parallel() || static_cast<double>(rows) * static_cast<double>(total_rows) * cols < (1 << 18)) {
    for (int64_t r = 0; r < rows; ++r) quantize_row(r);
    for (int64_t item = 0; item < items; ++item) run_item(item);
    return;
  }
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) quantize_row(r);
#pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < items; ++item) run_item(item);
  }
}

void LinearGgml::forward_reference(const float* x, int64_t rows, float* y, bool accumulate) const {
  const bool q4 = type_ == GgmlType::kQ4_K, q6 = type_ == GgmlType::kQ6_K;
  const int64_t block = q4 || q6 ? kQK_K : kQK8_0, nblk = cols_ / block;
  std::vector<int8_t> xq(static_cast<size_t>(rows * cols_));
  std::vector<float> xd(static_cast<size_t>(rows * nblk));
  std::vector<int16_t> xs(static_cast<size_t>(rows * nblk * 8));
  if (q4 || q6)
    quantize_activations_q8_k(x, rows, cols_, xq.data(), xd.data(), xs.data());
  else
    quantize_activations_q8(x, rows, cols_, xq.data(), xd.data());
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t n = 0; n < rows_; ++n) {
      const uint8_t* w = data_ + n * row_bytes_;
      const int8_t* xr = xq.data() + m * cols_;
      float lane[8] = {};
      for (int64_t b = 0; b < nblk; ++b) {
        const float dx = xd[m * nblk + b];
        if (q6) {  // ql[128], qh[64], int8 scales[16], f16 d; element e of chunk ch = 32ch + e
          BlockQ6_K blk;
          std::memcpy(&blk, w + b * sizeof(BlockQ6_K), sizeof(blk));
          int32_t sumi[8] = {};
          for (int ch = 0; ch < 8; ++ch)
            for (int l = 0; l < 8; ++l)
              for (int e = 4 * l; e < 4 * l + 4; ++e) {
                const int h = ch / 4, q = ch % 4;
                const uint8_t low = blk.ql[64 * h + 32 * (q % 2) + e];
                const int q6v = (q < 2 ? low & 0xF : low >> 4) | (((blk.qh[32 * h + e] >> (2 * q)) & 3) << 4);
                sumi[l] += int32_t{blk.scales[(32 * ch + e) / 16]} * (q6v - 32) * xr[b * kQK_K + 32 * ch + e];
              }
          const float dd = f16_to_f32(blk.d) * dx;
          for (int l = 0; l < 8; ++l) lane[l] = std::fma(static_cast<float>(sumi[l]), dd, lane[l]);
          continue;
        }
        if (type_ == GgmlType::kQ4_0) {  // block: f16 d, 16 bytes (low nibbles: elements 0-15, high: 16-31)
          BlockQ4_0 blk;
          std::memcpy(&blk, w + b * sizeof(BlockQ4_0), sizeof(blk));
          const float scale = f16_to_f32(blk.d) * dx;
          for (int l = 0; l < 8; ++l) {
            int32_t s = 0;
            for (int e = 4 * l; e < 4 * l + 4; ++e) {
              const int q = e < 16 ? blk.qs[e] & 0xF : blk.qs[e - 16] >> 4;
              s += (q - 8) * xr[b * kQK8_0 + e];
            }
            lane[l] = std::fma(static_cast<float>(s), scale, lane[l]);
          }
          continue;
        }
        if (!q4) {  // block: f16 d, 32 int8
          BlockQ8_0 blk;
          std::memcpy(&blk, w + b * sizeof(BlockQ8_0), sizeof(blk));
          const float scale = f16_to_f32(blk.d) * dx;
          for (int l = 0; l < 8; ++l) {
            int32_t s = 0;
            for (int e = 4 * l; e < 4 * l + 4; ++e) s += int32_t{blk.qs[e]} * xr[b * kQK8_0 + e];
            lane[l] = std::fma(static_cast<float>(s), scale, lane[l]);
          }
          continue;
        }
        BlockQ4_K blk;
        std::memcpy(&blk, w + b * sizeof(BlockQ4_K), sizeof(blk));
        int32_t sumi[8] = {}, summ[8] = {};
        for (int j = 0; j < 8; ++j) {
          uint8_t sc, mn;
          q4k_scale_min(j, blk.scales, &sc, &mn);
          int32_t xsum = 0;
          for (int e = 0; e < 32; ++e) xsum += xr[b * kQK_K + 32 * j + e];
          summ[j / 2] += int32_t{mn} * xsum;
          for (int l = 0; l < 8; ++l) {
            int32_t s = 0;
            for (int e = 4 * l; e < 4 * l + 4; ++e) {
              const uint8_t byte = blk.qs[32 * (j / 2) + e];
              s += int32_t{j % 2 ? byte >> 4 : byte & 0xF} * xr[b * kQK_K + 32 * j + e];
            }
            sumi[l] += int32_t{sc} * s;
          }
        }
        const float dd = f16_to_f32(blk.d) * dx, dm = f16_to_f32(blk.dmin) * dx;
        for (int l = 0; l < 8; ++l) {
          lane[l] = std::fma(static_cast<float>(sumi[l]), dd, lane[l]);
          lane[l] = std::fma(-static_cast<float>(summ[l]), dm, lane[l]);
        }
      }
      const float h =
          ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
      float& out = y[m * rows_ + n];
      out = accumulate ? out + h : h;
    }
}

void LinearGgml::dequantize_row(int64_t row, float* out) const {
  dequantize(type_, data_ + row * row_bytes_, out, cols_);
}

}  // namespace dllm::quant
