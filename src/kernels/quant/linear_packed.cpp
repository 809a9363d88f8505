#include "kernels/quant/linear_packed.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/huge_pages.h"
#include "kernels/amx.h"
#include "kernels/profile.h"
#include "kernels/quant/linear_ggml.h"
#include "kernels/quant/linear_q8.h"
#include "kernels/quant/quant.h"

namespace dllm::quant {

namespace {

constexpr int kRows = LinearPacked::kPanelRows;

// What a tile reads: the first panel's quants and scales (the next panels follow at the strides), the
// activation rows of the tile (Q8_0: int8, f32 scale per block, int32 sum per block) and where y goes.
struct TileArgs {
  const uint8_t* quants;
  const uint8_t* meta;               // per block: Q8_0 / Q4_0 16 f16 scales; Q4_K see LinearPacked
  size_t quant_stride, meta_stride;  // bytes from one panel to the next
  int64_t nb, k;
  const int8_t* xq;
  const float* xd;
  const int32_t* xs;    // Q8_0 / Q4_0: sum of each block's int8s
  const int16_t* xs16;  // Q4_K (Q8_K activations): sums of each 32 int8s
  float* y;
  int64_t ldy;
  bool accumulate;
};

// Q4_K metadata of one panel and super-block: d and dmin (16 f16 each), then the 6-bit scales and mins
// unpacked to bytes, [sub-block][row].
constexpr size_t kQ4kDmin = 32, kQ4kScales = 64, kQ4kMins = 192, kQ4kMetaBytes = 320;

// Few activation rows stream the weights from memory. A tile reads its RP panels side by side, so each
// panel's quants, and each panel's scales, are a stream of their own: every 64-byte line is prefetched a
// fixed distance ahead in its stream, and past the panel's end the prefetch goes on into the same stream of
// the next tile (RP panels on), which the next call reads. Without that, each call's streams began cold: the
// hardware prefetcher ramps up anew on each, and an 896-column Q4_0 panel is only 7 KiB of quants and 896
// bytes of scales (the 896 x 896 matrices of a 0.5B model ran at 18 GB/s, 4096 x 4096 at 40).
constexpr int kPrefetchRows = 2;
constexpr size_t kPrefetchBytes = 4096;  // in the quants; the scales' distance is in proportion
template <int RP>
inline void prefetch_stream(const uint8_t* panel, size_t at, size_t distance, size_t stride) {
  size_t to = at + distance;
  if (to >= stride) to += (RP - 1) * stride;
  _mm_prefetch(reinterpret_cast<const char*>(panel + to), _MM_HINT_T0);
}

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ---- AVX512_VNNI: RM activation rows x RP panels (16 weight rows each, one zmm of int32 / f32 lanes).
// Compiled for AVX-512 only in this region and only called where cpuid reports it; internal linkage and no
// library templates instantiated here, so nothing AVX-512 can be picked by the linker for shared code.
// (clang, for the libFuzzer build, spells GCC's target pragma as an attribute pushed on every function.)
#if defined(__clang__)
#pragma clang attribute push( \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,f16c,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,f16c,fma")
#endif
namespace vnni {

template <int RM, int RP, bool kQ4>
void tile(const TileArgs& a) {
  __m512 acc[RM][RP];
  for (int r = 0; r < RM; ++r)
    for (int p = 0; p < RP; ++p) acc[r][p] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  constexpr int32_t kOffset = kQ4 ? -8 : -128;
  constexpr size_t kQBytes = kQ4 ? 256 : 512;
  for (int64_t b = 0; b < a.nb; ++b) {
    __m512i dot[RM][RP];
    for (int r = 0; r < RM; ++r) {
      const __m512i init = _mm512_set1_epi32(kOffset * a.xs[r * a.nb + b]);
      for (int p = 0; p < RP; ++p) dot[r][p] = init;
    }
    const int8_t* xb = a.xq + b * kQK8_0;
    const uint8_t* qb = a.quants + b * kQBytes;
    if constexpr (RM <= kPrefetchRows)
      if (b % 2 == 0)  // 32 bytes of scales a block: one line every other block
        for (int p = 0; p < RP; ++p)
          prefetch_stream<RP>(a.meta + p * a.meta_stride, b * 32, kPrefetchBytes * 32 / kQBytes,
                              a.meta_stride);
    if constexpr (kQ4) {
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        __m512i lo[RP], hi[RP];
        for (int p = 0; p < RP; ++p) {
          if constexpr (RM <= kPrefetchRows)
            prefetch_stream<RP>(a.quants + p * a.quant_stride, b * kQBytes + 64 * g, kPrefetchBytes,
                                a.quant_stride);
          const __m512i v = _mm512_load_si512(qb + p * a.quant_stride + 64 * g);
          lo[p] = _mm512_and_si512(v, low4);
          hi[p] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        }
        for (int r = 0; r < RM; ++r) {
          const __m512i xl = _mm512_set1_epi32(load_i32(xb + r * a.k + 4 * g));
          const __m512i xh = _mm512_set1_epi32(load_i32(xb + r * a.k + 16 + 4 * g));
          for (int p = 0; p < RP; ++p) {
            dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], lo[p], xl);
            dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], hi[p], xh);
          }
        }
      }
    } else {
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        __m512i w[RP];
        for (int p = 0; p < RP; ++p) {
          if constexpr (RM <= kPrefetchRows)
            prefetch_stream<RP>(a.quants + p * a.quant_stride, b * kQBytes + 64 * g, kPrefetchBytes,
                                a.quant_stride);
          w[p] = _mm512_load_si512(qb + p * a.quant_stride + 64 * g);
        }
        for (int r = 0; r < RM; ++r) {
          const __m512i x4 = _mm512_set1_epi32(load_i32(xb + r * a.k + 4 * g));
          for (int p = 0; p < RP; ++p) dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], w[p], x4);
        }
      }
    }
    for (int p = 0; p < RP; ++p) {
      const __m512 dw = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.meta + p * a.meta_stride + b * 32)));
      for (int r = 0; r < RM; ++r)
        acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][p]),
                                    _mm512_mul_ps(dw, _mm512_set1_ps(a.xd[r * a.nb + b])), acc[r][p]);
    }
  }
  for (int r = 0; r < RM; ++r)
    for (int p = 0; p < RP; ++p) {
      float* out = a.y + r * a.ldy + p * kRows;
      _mm512_storeu_ps(out, a.accumulate ? _mm512_add_ps(_mm512_loadu_ps(out), acc[r][p]) : acc[r][p]);
    }
}

// Q4_K x Q8_K: per super-block, per pair of sub-blocks (one 64-byte group holds 16 rows x 4 bytes whose low
// nibbles are sub-block 2jp and high nibbles 2jp + 1), vpdpbusd gives each row's int32 dot of each sub-block
// (<= 32 * 15 * 127); times its 6-bit scale (vpmulld) into sumi (<= 8 * 63 * 60960 < 2^31). The mins term
// sum_j m_j * xsum_j is 4 vpdpwssd of (m_2i, m_2i+1) pairs against the activation's pairs of 32-sums.
template <int RM, int RP>
void tile_q4k(const TileArgs& a) {
  __m512 acc[RM][RP];
  for (int r = 0; r < RM; ++r)
    for (int p = 0; p < RP; ++p) acc[r][p] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int64_t sb = 0; sb < a.nb; ++sb) {
    __m512i sumi[RM][RP];
    for (int r = 0; r < RM; ++r)
      for (int p = 0; p < RP; ++p) sumi[r][p] = _mm512_setzero_si512();
    const int8_t* xb = a.xq + sb * kQK_K;
    if constexpr (RM <= kPrefetchRows)
      for (int p = 0; p < RP; ++p)
        for (size_t line = 0; line < kQ4kMetaBytes; line += 64)
          prefetch_stream<RP>(a.meta + p * a.meta_stride, sb * kQ4kMetaBytes + line,
                              kPrefetchBytes * kQ4kMetaBytes / 2048, a.meta_stride);
    for (int jp = 0; jp < 4; ++jp) {
      __m512i dl[RM][RP], dh[RM][RP];
      for (int r = 0; r < RM; ++r)
        for (int p = 0; p < RP; ++p) dl[r][p] = dh[r][p] = _mm512_setzero_si512();
      const uint8_t* qb = a.quants + sb * 2048 + jp * 512;
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        __m512i lo[RP], hi[RP];
        for (int p = 0; p < RP; ++p) {
          if constexpr (RM <= kPrefetchRows)
            prefetch_stream<RP>(a.quants + p * a.quant_stride, sb * 2048 + jp * 512 + 64 * g, kPrefetchBytes,
                                a.quant_stride);
          const __m512i v = _mm512_load_si512(qb + p * a.quant_stride + 64 * g);
          lo[p] = _mm512_and_si512(v, low4);
          hi[p] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        }
        for (int r = 0; r < RM; ++r) {
          const __m512i xl = _mm512_set1_epi32(load_i32(xb + r * a.k + 64 * jp + 4 * g));
          const __m512i xh = _mm512_set1_epi32(load_i32(xb + r * a.k + 64 * jp + 32 + 4 * g));
          for (int p = 0; p < RP; ++p) {
            dl[r][p] = _mm512_dpbusd_epi32(dl[r][p], lo[p], xl);
            dh[r][p] = _mm512_dpbusd_epi32(dh[r][p], hi[p], xh);
          }
        }
      }
      for (int p = 0; p < RP; ++p) {
        const uint8_t* sc = a.meta + p * a.meta_stride + sb * kQ4kMetaBytes + kQ4kScales + 2 * jp * kRows;
        const __m512i sl = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
        const __m512i sh =
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + kRows)));
        for (int r = 0; r < RM; ++r)
          sumi[r][p] = _mm512_add_epi32(sumi[r][p], _mm512_add_epi32(_mm512_mullo_epi32(dl[r][p], sl),
                                                                     _mm512_mullo_epi32(dh[r][p], sh)));
      }
    }
    for (int p = 0; p < RP; ++p) {
      const uint8_t* meta = a.meta + p * a.meta_stride + sb * kQ4kMetaBytes;
      __m512i mins[4];
      for (int i = 0; i < 4; ++i) {
        const uint8_t* mp = meta + kQ4kMins + 2 * i * kRows;
        mins[i] = _mm512_or_si512(
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mp))),
            _mm512_slli_epi32(
                _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mp + kRows))), 16));
      }
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta)));
      const __m512 dmin =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta + kQ4kDmin)));
      for (int r = 0; r < RM; ++r) {
        const int16_t* xs = a.xs16 + (r * a.nb + sb) * 8;
        __m512i summ = _mm512_setzero_si512();
        for (int i = 0; i < 4; ++i) {
          int32_t pair;
          std::memcpy(&pair, xs + 2 * i, 4);
          summ = _mm512_dpwssd_epi32(summ, mins[i], _mm512_set1_epi32(pair));
        }
        const __m512 dx = _mm512_set1_ps(a.xd[r * a.nb + sb]);
        acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[r][p]), _mm512_mul_ps(d, dx), acc[r][p]);
        acc[r][p] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(dmin, dx), acc[r][p]);
      }
    }
  }
  for (int r = 0; r < RM; ++r)
    for (int p = 0; p < RP; ++p) {
      float* out = a.y + r * a.ldy + p * kRows;
      _mm512_storeu_ps(out, a.accumulate ? _mm512_add_ps(_mm512_loadu_ps(out), acc[r][p]) : acc[r][p]);
    }
}

}  // namespace vnni
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// ---- AMX_INT8: 16 activation rows x 1 panel per tile call, one tile multiply per block. A is the 16 rows'
// int8 block (16 x 32 bytes, gathered per forward into 512 contiguous bytes: rows K bytes apart would all
// fall in one L1 set), B the panel's block
// in the VNNI layout (8 x 64 bytes: byte 4n + i of row g is element 4g + i of weight row n, exactly the
// layout vpdpbusd reads; Q4_0's nibbles are first spread to bytes, once per panel, into a scratch), and
// tdpbsud (signed A, unsigned B) gives the 16 x 16 exact int32 dots of the block. Q8_0 blocks of 32 need
// a float scale per block, so each block's tile goes through memory to AVX-512 for the offset, the int to
// float conversion and the fma: the same operations, in the same order, as the VNNI tiles and the reference
// (the same bits). Tile registers: tmm0-3 C (16 x 64 bytes), tmm4-5 A (16 x 32), tmm6-7 B (8 x 64).
// The tile configuration is per thread and other code (oneDNN's AMX bf16 kernels) loads its own, so it is
// loaded at the start of every work item and released at its end.
#if defined(__clang__)
#pragma clang attribute push(                                                                            \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,f16c,fma,amx-tile,amx-int8"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,f16c,fma,amx-tile,amx-int8")
#endif
namespace amx {

constexpr int kTileRows = 16;

void configure() {
  AmxTileConfig c;
  for (int t = 0; t < 4; ++t) c.rows[t] = 16, c.colsb[t] = 64;  // C: 16 x 16 int32
  for (int t = 4; t < 6; ++t) c.rows[t] = 16, c.colsb[t] = 32;  // A: 16 rows x 32 int8
  for (int t = 6; t < 8; ++t) c.rows[t] = 8, c.colsb[t] = 64;   // B: 8 groups of 4 x 16 columns
  amx_load_tile_config(c);
}
void release() {
  _tile_release();
}

// Q4_0: the panel's nb blocks of nibbles (4 x 64 bytes each) spread into B tiles (8 x 64 bytes each): rows
// 0-3 the low nibbles (elements 0-15), rows 4-7 the high ones (16-31).
void spread_nibbles(const uint8_t* q, int64_t nb, uint8_t* out) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b)
    for (int g = 0; g < 4; ++g) {
      const __m512i v = _mm512_load_si512(q + b * 256 + 64 * g);
      _mm512_storeu_si512(out + b * 512 + 64 * g, _mm512_and_si512(v, low4));
      _mm512_storeu_si512(out + b * 512 + 256 + 64 * g, _mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
    }
}

// a.quants: the panel's B tiles, 512 bytes a block (Q8_0's own quants, or Q4_0's spread by spread_nibbles);
// a.xq: the 16 rows' A tiles, 512 bytes a block (16 rows x 32 int8); a.xs the offsets (-128 or -8 times the
// block's sum) and a.xd the scales, [block][16 rows]: each a broadcast straight from memory.
// Blocks go four at a time into C tiles 0-3; the scaling of the previous four (stored to the other half of
// `dots`) runs while they multiply, so the tile unit and the vector units work side by side.
void tile(const TileArgs& a) {
  alignas(64) int32_t dots[2][4][kTileRows * 16];
  __m512 acc[kTileRows];
  for (int r = 0; r < kTileRows; ++r) acc[r] = _mm512_setzero_ps();
  // Inlined with its loop unrolled, so that acc stays in registers.
  const auto scale = [&](int64_t b, const int32_t* cb) __attribute__((always_inline)) {
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.meta + b * 32)));
#pragma GCC unroll 16
    for (int r = 0; r < kTileRows; ++r) {
      const __m512i dot =
          _mm512_add_epi32(_mm512_load_si512(cb + 16 * r), _mm512_set1_epi32(a.xs[b * kTileRows + r]));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                               _mm512_mul_ps(dw, _mm512_set1_ps(a.xd[b * kTileRows + r])), acc[r]);
    }
  };
  const int8_t* x = a.xq;
  const uint8_t* w = a.quants;
  const int64_t whole = a.nb / 4 * 4;
  int half = 0;
  for (int64_t b = 0; b < whole; b += 4, half ^= 1) {
    _tile_zero(0);
    _tile_loadd(4, x + b * 512, kQK8_0);
    _tile_loadd(6, w + b * 512, 64);
    _tile_dpbsud(0, 4, 6);
    _tile_zero(1);
    _tile_loadd(5, x + (b + 1) * 512, kQK8_0);
    _tile_loadd(7, w + (b + 1) * 512, 64);
    _tile_dpbsud(1, 5, 7);
    _tile_zero(2);
    _tile_loadd(4, x + (b + 2) * 512, kQK8_0);
    _tile_loadd(6, w + (b + 2) * 512, 64);
    _tile_dpbsud(2, 4, 6);
    _tile_zero(3);
    _tile_loadd(5, x + (b + 3) * 512, kQK8_0);
    _tile_loadd(7, w + (b + 3) * 512, 64);
    _tile_dpbsud(3, 5, 7);
    if (b > 0)
      for (int j = 0; j < 4; ++j) scale(b - 4 + j, dots[half ^ 1][j]);
    _tile_stored(0, dots[half][0], 64);
    _tile_stored(1, dots[half][1], 64);
    _tile_stored(2, dots[half][2], 64);
    _tile_stored(3, dots[half][3], 64);
  }
  if (whole > 0)
    for (int j = 0; j < 4; ++j) scale(whole - 4 + j, dots[half ^ 1][j]);
  for (int64_t b = whole; b < a.nb; ++b) {  // the last nb % 4 blocks, one at a time
    _tile_zero(0);
    _tile_loadd(4, x + b * 512, kQK8_0);
    _tile_loadd(6, w + b * 512, 64);
    _tile_dpbsud(0, 4, 6);
    _tile_stored(0, dots[0][0], 64);
    scale(b, dots[0][0]);
  }
  for (int r = 0; r < kTileRows; ++r) {
    float* out = a.y + r * a.ldy;
    _mm512_storeu_ps(out, a.accumulate ? _mm512_add_ps(_mm512_loadu_ps(out), acc[r]) : acc[r]);
  }
}

}  // namespace amx
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// ---- 256-bit tiles: AVX2, and the same with AVX-VNNI's fused multiply-adds (CPUs with AVX-VNNI and no
// AVX-512). The AVX-VNNI copy is compiled for that extension only in its region, internal linkage, as above.
namespace avx2 {
#define DLLM_PACKED_VNNI 0
#include "kernels/quant/linear_packed_tiles_256.inc"
#undef DLLM_PACKED_VNNI
}  // namespace avx2

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
#endif
namespace avx_vnni {
#define DLLM_PACKED_VNNI 1
#include "kernels/quant/linear_packed_tiles_256.inc"
#undef DLLM_PACKED_VNNI
}  // namespace avx_vnni
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

using TileFn = void (*)(const TileArgs&);

// The tile shapes: VNNI 4 rows x 2 panels (24 of 32 zmm registers), AVX2 2 rows x 1 panel.
struct TileSet {
  int rows, panels;
  TileFn fn[4][4];  // [rows - 1][panels - 1]
};

// With 1-2 rows the weights stream from memory: 4 panels a tile give 4 independent vpdpbusd chains per row.
template <bool kQ4>
constexpr TileSet kVnniStreamTiles = {
    2,
    4,
    {{vnni::tile<1, 1, kQ4>, vnni::tile<1, 2, kQ4>, vnni::tile<1, 3, kQ4>, vnni::tile<1, 4, kQ4>},
     {vnni::tile<2, 1, kQ4>, vnni::tile<2, 2, kQ4>, vnni::tile<2, 3, kQ4>, vnni::tile<2, 4, kQ4>}}};
template <bool kQ4>
constexpr TileSet kVnniTiles = {4,
                                2,
                                {{vnni::tile<1, 1, kQ4>, vnni::tile<1, 2, kQ4>},
                                 {vnni::tile<2, 1, kQ4>, vnni::tile<2, 2, kQ4>},
                                 {vnni::tile<3, 1, kQ4>, vnni::tile<3, 2, kQ4>},
                                 {vnni::tile<4, 1, kQ4>, vnni::tile<4, 2, kQ4>}}};
template <bool kQ4>
constexpr TileSet kAvx2Tiles = {2, 1, {{avx2::tile<1, 1, kQ4>, nullptr}, {avx2::tile<2, 1, kQ4>, nullptr}}};
// Q4_K: 4 rows x 1 panel on VNNI (sumi, and the two sub-block dots, live across a pair: 16 zmm), 2 x 1 on
// AVX2.
constexpr TileSet kVnniQ4kTiles = {4,
                                   1,
                                   {{vnni::tile_q4k<1, 1>, nullptr},
                                    {vnni::tile_q4k<2, 1>, nullptr},
                                    {vnni::tile_q4k<3, 1>, nullptr},
                                    {vnni::tile_q4k<4, 1>, nullptr}}};
// With 1-2 rows the weights stream from memory: 2 panels a tile give 4 independent vpdpbusd chains per row.
constexpr TileSet kVnniQ4kStreamTiles = {
    2, 2, {{vnni::tile_q4k<1, 1>, vnni::tile_q4k<1, 2>}, {vnni::tile_q4k<2, 1>, vnni::tile_q4k<2, 2>}}};
constexpr TileSet kAvx2Q4kTiles = {2, 1, {{avx2::tile_q4k<1, 1>, nullptr}, {avx2::tile_q4k<2, 1>, nullptr}}};
// AVX-VNNI: AVX2's register file, so AVX2's shapes.
template <bool kQ4>
constexpr TileSet kAvxVnniTiles = {
    2, 1, {{avx_vnni::tile<1, 1, kQ4>, nullptr}, {avx_vnni::tile<2, 1, kQ4>, nullptr}}};
constexpr TileSet kAvxVnniQ4kTiles = {
    2, 1, {{avx_vnni::tile_q4k<1, 1>, nullptr}, {avx_vnni::tile_q4k<2, 1>, nullptr}}};

// Grows only: once warm, a forward allocates nothing.
struct Scratch {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> s;
  std::vector<int16_t> s16;
  std::vector<uint8_t> spread;     // AMX Q4_0: one panel's blocks as B tiles (each thread its own)
  std::vector<int8_t> a_tiles;     // AMX: the activations as A tiles, [16-row group][block][16 rows][32]
  std::vector<int32_t> a_offsets;  // AMX: offset times block sum, [16-row group][block][16 rows]
  std::vector<float> a_scales;     // AMX: the blocks' scales, [16-row group][block][16 rows]
  std::vector<int64_t> group_first;                      // forward_group: each output's first panel
  std::vector<std::pair<int64_t, int64_t>> group_items;  // forward_group: the work items' panel ranges
};
thread_local Scratch tls_scratch;

template <class T>
T* grow(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

void block_sums(const int8_t* q, int64_t nb, int32_t* s) {
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sum = 0;
    for (int e = 0; e < kQK8_0; ++e) sum += q[b * kQK8_0 + e];
    s[b] = sum;
  }
}

// The packed weights on shared huge pages, one matrix after another (core/huge_pages.h).
template <class T>
std::shared_ptr<T> aligned_array(size_t count) {
  std::shared_ptr<void> buffer = pooled_huge_page_buffer(count * sizeof(T));
  return std::shared_ptr<T>(buffer, static_cast<T*>(buffer.get()));
}

}  // namespace

bool LinearPacked::can_pack(GgmlType type, int64_t rows, int64_t cols) {
  const int64_t block = type == GgmlType::kQ4_K ? kQK_K : kQK8_0;
  return (type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || type == GgmlType::kQ4_K) && rows > 0 &&
         rows % kRows == 0 && cols > 0 && cols % block == 0;
}

size_t LinearPacked::quant_bytes_per_block() const {
  return type_ == GgmlType::kQ8_0 ? 512 : type_ == GgmlType::kQ4_0 ? 256 : 2048;
}
size_t LinearPacked::meta_bytes_per_block() const {
  return type_ == GgmlType::kQ4_K ? kQ4kMetaBytes : 32;
}
int64_t LinearPacked::block_elements() const {
  return type_ == GgmlType::kQ4_K ? kQK_K : kQK8_0;
}

size_t LinearPacked::weight_bytes() const {
  return static_cast<size_t>(rows_ / kRows * blocks_) * (quant_bytes_per_block() + meta_bytes_per_block());
}

LinearPacked LinearPacked::pack(GgmlType type, const void* blocks, int64_t rows, int64_t cols,
                                Kernel kernel) {
  if (!can_pack(type, rows, cols))
    fail("LinearPacked: cannot pack a ", rows, " x ", cols, " ", ggml_type_name(static_cast<uint32_t>(type)),
         " matrix (Q8_0, Q4_0 or Q4_K, rows a multiple of ", kRows, ", whole blocks per row)");
  if (kernel == Kernel::kAuto) kernel = best_kernel();
  if (!supported(kernel)) fail("LinearPacked: this CPU cannot run the ", kernel_name(kernel), " kernel");
  LinearPacked l;
  l.type_ = type;
  l.kernel_ = kernel;
  l.rows_ = rows;
  l.cols_ = cols;
  l.blocks_ = cols / l.block_elements();
  const int64_t panels = rows / kRows, nb = l.blocks_;
  const size_t qbytes = l.quant_bytes_per_block(), mbytes = l.meta_bytes_per_block();
  const size_t row_bytes = ggml_row_bytes(type, cols);
  l.quants_ = aligned_array<uint8_t>(static_cast<size_t>(panels * nb) * qbytes);
  l.meta_ = aligned_array<uint8_t>(static_cast<size_t>(panels * nb) * mbytes);
  const auto* src = static_cast<const uint8_t*>(blocks);
  const size_t block_bytes = ggml_row_bytes(type, l.block_elements());
  const uint8_t bias = type == GgmlType::kQ8_0 && kernel != Kernel::kAvx2 ? 0x80 : 0;  // w + 128 for VNNI
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* q = l.quants_.get() + static_cast<size_t>(p * nb + b) * qbytes;
      uint8_t* meta = l.meta_.get() + static_cast<size_t>(p * nb + b) * mbytes;
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* blk = src + static_cast<size_t>(p * kRows + r) * row_bytes + b * block_bytes;
        if (type == GgmlType::kQ4_K) {  // f16 d, f16 dmin, 12 bytes of scales / mins, 128 bytes of nibbles
          std::memcpy(meta + 2 * r, blk, 2);
          std::memcpy(meta + kQ4kDmin + 2 * r, blk + 2, 2);
          for (int j = 0; j < 8; ++j)
            q4k_scale_min(j, blk + 4, &meta[kQ4kScales + j * kRows + r], &meta[kQ4kMins + j * kRows + r]);
          for (int jp = 0; jp < 4; ++jp)
            for (int g = 0; g < 8; ++g)
              for (int i = 0; i < 4; ++i)
                q[jp * 512 + (g * kRows + r) * 4 + i] = blk[16 + 32 * jp + 4 * g + i];
          continue;
        }
        std::memcpy(meta + 2 * r, blk, 2);
        const int groups = type == GgmlType::kQ4_0 ? 4 : 8;
        for (int g = 0; g < groups; ++g)
          for (int i = 0; i < 4; ++i) q[(g * kRows + r) * 4 + i] = blk[2 + 4 * g + i] ^ bias;
      }
    }
  return l;
}

LinearPacked LinearPacked::quantize_f32(GgmlType type, const float* w, int64_t rows, int64_t cols,
                                        Kernel kernel) {
  if (!can_pack(type, rows, cols))
    fail("LinearPacked: cannot pack a ", rows, " x ", cols, " ", ggml_type_name(static_cast<uint32_t>(type)),
         " matrix");
  std::vector<uint8_t> blocks(ggml_row_bytes(type, cols) * static_cast<size_t>(rows));
  quantize(type, w, blocks.data(), rows * cols);
  return pack(type, blocks.data(), rows, cols, kernel);
}

// Row `row`'s integer weights of block b (q - 8 for Q4_0; the 4-bit q for Q4_K), read back from the panel.
void LinearPacked::block_ints(int64_t row, int64_t b, int32_t* out) const {
  const int64_t p = row / kRows, r = row % kRows;
  const uint8_t* q = quants_.get() + static_cast<size_t>(p * blocks_ + b) * quant_bytes_per_block();
  if (type_ == GgmlType::kQ4_K) {
    for (int jp = 0; jp < 4; ++jp)
      for (int g = 0; g < 8; ++g)
        for (int i = 0; i < 4; ++i) {
          const uint8_t byte = q[jp * 512 + (g * kRows + r) * 4 + i];
          out[64 * jp + 4 * g + i] = byte & 0xF;
          out[64 * jp + 32 + 4 * g + i] = byte >> 4;
        }
    return;
  }
  const bool q4 = type_ == GgmlType::kQ4_0;
  const uint8_t bias = !q4 && kernel_ != Kernel::kAvx2 ? 0x80 : 0;
  for (int g = 0; g < (q4 ? 4 : 8); ++g)
    for (int i = 0; i < 4; ++i) {
      const uint8_t byte = q[(g * kRows + r) * 4 + i];
      if (q4) {
        out[4 * g + i] = (byte & 0xF) - 8;
        out[16 + 4 * g + i] = (byte >> 4) - 8;
      } else {
        out[4 * g + i] = static_cast<int8_t>(byte ^ bias);
      }
    }
}

void LinearPacked::dequantize_row(int64_t row, float* out) const {
  const int64_t p = row / kRows, r = row % kRows, be = block_elements();
  std::vector<int32_t> ints(static_cast<size_t>(be));
  for (int64_t b = 0; b < blocks_; ++b) {
    const uint8_t* meta = meta_.get() + static_cast<size_t>(p * blocks_ + b) * meta_bytes_per_block();
    block_ints(row, b, ints.data());
    float* o = out + b * be;
    uint16_t h;
    std::memcpy(&h, meta + 2 * r, 2);
    const float d = f16_to_f32(h);
    if (type_ != GgmlType::kQ4_K) {
      for (int e = 0; e < be; ++e) o[e] = static_cast<float>(ints[static_cast<size_t>(e)]) * d;
      continue;
    }
    std::memcpy(&h, meta + kQ4kDmin + 2 * r, 2);
    const float dmin = f16_to_f32(h);
    for (int j = 0; j < 8; ++j) {  // as ggml's dequantize_row_q4_K
      const float d1 = d * meta[kQ4kScales + j * kRows + r], m1 = dmin * meta[kQ4kMins + j * kRows + r];
      for (int e = 0; e < 32; ++e) o[32 * j + e] = d1 * static_cast<float>(ints[32 * j + e]) - m1;
    }
  }
}

bool LinearPacked::can_group(const LinearPacked& a, const LinearPacked& b) {
  return a.type_ == b.type_ && a.kernel_ == b.kernel_ && a.cols_ == b.cols_;
}

void LinearPacked::forward(const float* x, int64_t rows, float* y, bool accumulate) const {
  const Output out{this, y};
  forward_group({&out, 1}, x, rows, accumulate);
}

void LinearPacked::forward_group(std::span<const Output> outs, const float* x, int64_t rows,
                                 bool accumulate) {
  run_group(outs, x, rows, accumulate, 0, 0);
}

void LinearPacked::forward_group_share(std::span<const Output> outs, const float* x, int64_t rows,
                                       bool accumulate, int thread, int threads) {
  if (rows > kShareRows) fail("LinearPacked::forward_group_share: ", rows, " rows, more than ", kShareRows);
  if (threads <= 0 || thread < 0 || thread >= threads)
    fail("LinearPacked::forward_group_share: thread ", thread, " of ", threads);
  run_group(outs, x, rows, accumulate, thread, threads);
}

void LinearPacked::run_group(std::span<const Output> outs, const float* x, int64_t rows, bool accumulate,
                             int share_thread, int share_threads) {
  if (rows <= 0 || outs.empty()) return;
  const LinearPacked& w0 = *outs[0].weights;
  for (const Output& o : outs)
    if (!can_group(w0, *o.weights))
      fail("LinearPacked::forward_group: the matrices differ in block type, kernel or width (",
           ggml_type_name(static_cast<uint32_t>(w0.type_)), " x ", w0.cols_, " and ",
           ggml_type_name(static_cast<uint32_t>(o.weights->type_)), " x ", o.weights->cols_, ")");
  ScopedKernelTimer timer(KernelKind::kMatmul);
  const int64_t k = w0.cols_, nb = w0.blocks_;
  const GgmlType type = w0.type_;
  const Kernel kernel = w0.kernel_;
  const bool q4k = type == GgmlType::kQ4_K;
  Scratch& s = tls_scratch;
  // The activation rows quantised: int8s, a scale per block, and block sums (Q8_0 / Q4_0) or 32-sums (Q4_K).
  struct Activations {
    int8_t* xq;
    float* xd;
    int32_t* xs;
    int16_t* xs16;
  };
  const auto activations_in = [&](Scratch& scratch) {
    return Activations{grow(scratch.q, rows * k), grow(scratch.d, rows * nb),
                       q4k ? nullptr : grow(scratch.s, rows * nb),
                       q4k ? grow(scratch.s16, rows * nb * 8) : nullptr};
  };
  const Activations shared = activations_in(s);
  const bool q4_0 = type == GgmlType::kQ4_0;
  const bool vnni512 = kernel == Kernel::kAvx512Vnni || kernel == Kernel::kAmx;
  // AMX: the first amx_rows rows (whole 16-row tiles) of Q8_0 / Q4_0; the rest, and Q4_K, on AVX512_VNNI.
  const int64_t amx_rows = kernel == Kernel::kAmx && !q4k ? rows / amx::kTileRows * amx::kTileRows : 0;
  const TileSet& tiles = vnni512 ? (q4k    ? (rows <= 2 ? kVnniQ4kStreamTiles : kVnniQ4kTiles)
                                    : q4_0 ? (rows <= 2 ? kVnniStreamTiles<true> : kVnniTiles<true>)
                                           : (rows <= 2 ? kVnniStreamTiles<false> : kVnniTiles<false>))
                         : kernel == Kernel::kAvxVnni ? (q4k    ? kAvxVnniQ4kTiles
                                                         : q4_0 ? kAvxVnniTiles<true>
                                                                : kAvxVnniTiles<false>)
                                                      : (q4k    ? kAvx2Q4kTiles
                                                         : q4_0 ? kAvx2Tiles<true>
                                                                : kAvx2Tiles<false>);
  const size_t qstride = static_cast<size_t>(nb) * w0.quant_bytes_per_block();
  const size_t mstride = static_cast<size_t>(nb) * w0.meta_bytes_per_block();

  // The outputs' panels numbered one after another: output j holds panels first[j] .. first[j + 1] - 1.
  std::vector<int64_t>& first = s.group_first;
  first.assign(1, 0);
  int64_t out_rows = 0;
  for (const Output& o : outs) {
    first.push_back(first.back() + o.weights->rows_ / kRows);
    out_rows += o.weights->rows_;
  }
  const int64_t panels = first.back();
  const bool serial =
      share_threads == 0 &&
      (omp_in_parallel() || static_cast<double>(rows) * static_cast<double>(out_rows) * k < (1 << 18));
  const int64_t threads = serial ? 1 : share_threads > 0 ? share_threads : omp_get_max_threads();

  // A work item is a run of panels against every activation row, tile after tile: the panels' weights stay
  // in L2 while the rows stream past. With many rows an item is one tile of panels (dynamic schedule). With
  // few rows the weights stream from memory: one item per thread, its equal contiguous share of all the
  // outputs' panels, so each thread reads one long run (2 threads on 1-panel items of Q4_K read 24 GB/s here,
  // on 4-panel items 30+; one item per 896 x 896 Q4_0 matrix of 7 left one thread idle an eighth of the time;
  // a 128-row k or v alone ran on one thread) and its tiles are whole but at the ends. Each output is
  // computed by one thread in a fixed order: the same bits for any thread count and any grouping.
  std::vector<std::pair<int64_t, int64_t>>& items = s.group_items;  // [begin, end) in the numbering above
  items.clear();
  const bool streaming = rows <= 4;
  if (streaming) {
    const int64_t n = std::min(panels, threads);
    for (int64_t i = 0; i < n; ++i) items.emplace_back(i * panels / n, (i + 1) * panels / n);
  } else {
    for (size_t j = 0; j + 1 < first.size(); ++j)
      for (int64_t p = first[j]; p < first[j + 1]; p += tiles.panels)
        items.emplace_back(p, std::min(first[j + 1], p + tiles.panels));
  }

  const auto quantize_row = [&](const Activations& a, int64_t r) {
    if (q4k) {
      quantize_row_q8_k(x + r * k, k, a.xq + r * k, a.xd + r * nb, a.xs16 + r * nb * 8);
      return;
    }
    quantize_row_q8_avx2(x + r * k, k, a.xq + r * k, a.xd + r * nb);
    block_sums(a.xq + r * k, nb, a.xs + r * nb);
  };
  // AMX reads each 16 x 32 A tile from 512 contiguous bytes: rows K apart would all fall in one L1 set.
  int8_t* xa = amx_rows > 0 ? grow(s.a_tiles, amx_rows * k) : nullptr;
  int32_t* xoff = amx_rows > 0 ? grow(s.a_offsets, amx_rows * nb) : nullptr;
  float* xscale = amx_rows > 0 ? grow(s.a_scales, amx_rows * nb) : nullptr;
  const int32_t offset = q4_0 ? -8 : -128;
  const auto gather_a_tiles = [&](int64_t group) {
    for (int64_t b = 0; b < nb; ++b)
      for (int r = 0; r < amx::kTileRows; ++r) {
        const int64_t row = group * amx::kTileRows + r, at = (group * nb + b) * amx::kTileRows + r;
        std::memcpy(xa + at * kQK8_0, shared.xq + row * k + b * kQK8_0, kQK8_0);
        xoff[at] = offset * shared.xs[row * nb + b];
        xscale[at] = shared.xd[row * nb + b];
      }
  };
  // Panels begin .. end - 1 of one output's weights w, whose y is out (row stride w.rows_).
  const auto run_amx = [&](const LinearPacked& w, float* out, int64_t begin, int64_t end) {
    amx::configure();
    for (int64_t p = begin; p < end; ++p) {
      const uint8_t* b_tiles = w.quants_.get() + p * qstride;
      if (q4_0) {
        uint8_t* spread = grow(tls_scratch.spread, nb * 512);
        amx::spread_nibbles(b_tiles, nb, spread);
        b_tiles = spread;
      }
      // The next panel's quants into L2, a share before each row group: the first group's tile loads would
      // otherwise wait on memory one at a time (tile registers are not renamed, so loads cannot run ahead).
      const int64_t groups = amx_rows / amx::kTileRows;
      const size_t share = (qstride + groups - 1) / groups;
      for (int64_t m0 = 0; m0 < amx_rows; m0 += amx::kTileRows) {
        if (p + 1 < end) {
          const uint8_t* next = w.quants_.get() + (p + 1) * qstride + m0 / amx::kTileRows * share;
          for (size_t off = 0; off < share && next + off < w.quants_.get() + (p + 2) * qstride; off += 64)
            _mm_prefetch(reinterpret_cast<const char*>(next + off), _MM_HINT_T1);
        }
        const TileArgs a{b_tiles,
                         w.meta_.get() + p * mstride,
                         0,
                         0,
                         nb,
                         k,
                         xa + m0 * k,
                         xscale + m0 * nb,
                         xoff + m0 * nb,
                         nullptr,
                         out + m0 * w.rows_ + p * kRows,
                         w.rows_,
                         accumulate};
        amx::tile(a);
      }
    }
    amx::release();
  };
  const auto run_panels = [&](const Activations& x8, const LinearPacked& w, float* out, int64_t begin,
                              int64_t end) {
    if (amx_rows > 0) run_amx(w, out, begin, end);
    for (int64_t p0 = begin; p0 < end; p0 += tiles.panels) {
      const int np = static_cast<int>(std::min<int64_t>(tiles.panels, end - p0));
      for (int64_t m0 = amx_rows; m0 < rows; m0 += tiles.rows) {
        const int nm = static_cast<int>(std::min<int64_t>(tiles.rows, rows - m0));
        const TileArgs a{w.quants_.get() + p0 * qstride,
                         w.meta_.get() + p0 * mstride,
                         qstride,
                         mstride,
                         nb,
                         k,
                         x8.xq + m0 * k,
                         x8.xd + m0 * nb,
                         x8.xs ? x8.xs + m0 * nb : nullptr,
                         x8.xs16 ? x8.xs16 + m0 * nb * 8 : nullptr,
                         out + m0 * w.rows_ + p0 * kRows,
                         w.rows_,
                         accumulate};
        tiles.fn[nm - 1][np - 1](a);
      }
    }
  };
  const auto run_item = [&](const Activations& x8, int64_t item) {
    const auto [begin, end] = items[static_cast<size_t>(item)];
    for (size_t j = 0; j < outs.size(); ++j) {
      const int64_t b = std::max(begin, first[j]), e = std::min(end, first[j + 1]);
      if (b < e) run_panels(x8, *outs[j].weights, outs[j].y, b - first[j], e - first[j]);
    }
  };
  const auto n_items = static_cast<int64_t>(items.size());
  // Streaming: thread t of nt quantises the few rows itself, into its own scratch (cheaper than a barrier),
  // and runs items t, t + nt, ... (one item per thread: its equal contiguous share).
  const auto run_own_share = [&](int thread, int nt) {
    const Activations own = activations_in(tls_scratch);
    for (int64_t r = 0; r < rows; ++r) quantize_row(own, r);
    for (int64_t item = thread; item < n_items; item += nt) run_item(own, item);
  };
  if (share_threads > 0) return run_own_share(share_thread, share_threads);
  // Inside a parallel region (experts, one per thread) the work stays on this thread without a nested region.
  if (serial) {
    for (int64_t r = 0; r < rows; ++r) quantize_row(shared, r);
    for (int64_t g = 0; g < amx_rows / amx::kTileRows; ++g) gather_a_tiles(g);
    for (int64_t item = 0; item < n_items; ++item) run_item(shared, item);
    return;
  }
  if (streaming) {
    // No barrier inside the region: libgomp's barriers end in a futex wake, a system call (1.1 us in this
    // VM), and a token runs ~100 of these regions.
#pragma omp parallel
    run_own_share(omp_get_thread_num(), omp_get_num_threads());
    return;
  }
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) quantize_row(shared, r);
    if (amx_rows > 0) {
#pragma omp for schedule(static)
      for (int64_t g = 0; g < amx_rows / amx::kTileRows; ++g) gather_a_tiles(g);
    }
    // Tiles of unequal cost: dynamic.
#pragma omp for schedule(dynamic) nowait
    for (int64_t item = 0; item < n_items; ++item) run_item(shared, item);
  }
}

void LinearPacked::forward_reference(const float* x, int64_t rows, float* y, bool accumulate) const {
  const int64_t k = cols_, nb = blocks_, be = block_elements();
  const bool q4k = type_ == GgmlType::kQ4_K;
  std::vector<int8_t> xq(static_cast<size_t>(rows * k));
  std::vector<float> xd(static_cast<size_t>(rows * nb));
  std::vector<int16_t> xs(static_cast<size_t>(rows * nb * 8));
  if (q4k)
    quantize_activations_q8_k(x, rows, k, xq.data(), xd.data(), xs.data());
  else
    quantize_activations_q8(x, rows, k, xq.data(), xd.data());
  std::vector<int32_t> w(static_cast<size_t>(k));
  for (int64_t n = 0; n < rows_; ++n) {
    const int64_t p = n / kRows, r = n % kRows;
    for (int64_t b = 0; b < nb; ++b) block_ints(n, b, w.data() + b * be);
    for (int64_t m = 0; m < rows; ++m) {
      const int8_t* xr = xq.data() + m * k;
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* meta = meta_.get() + static_cast<size_t>(p * nb + b) * meta_bytes_per_block();
        uint16_t h;
        std::memcpy(&h, meta + 2 * r, 2);
        const float d = f16_to_f32(h), dx = xd[m * nb + b];
        const int32_t* wb = w.data() + b * be;
        if (!q4k) {
          int32_t dot = 0;
          for (int e = 0; e < kQK8_0; ++e) dot += wb[e] * xr[b * kQK8_0 + e];
          acc = std::fma(static_cast<float>(dot), d * dx, acc);
          continue;
        }
        // Q4_K: sum_j sc_j * (q . x over sub-block j), and sum_j m_j * (sum of x over sub-block j).
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < 8; ++j) {
          int32_t dot = 0, xsum = 0;
          for (int e = 0; e < 32; ++e) {
            dot += wb[32 * j + e] * xr[b * kQK_K + 32 * j + e];
            xsum += xr[b * kQK_K + 32 * j + e];
          }
          sumi += meta[kQ4kScales + j * kRows + r] * dot;
          summ += meta[kQ4kMins + j * kRows + r] * xsum;
        }
        std::memcpy(&h, meta + kQ4kDmin + 2 * r, 2);
        acc = std::fma(static_cast<float>(sumi), d * dx, acc);
        acc = std::fma(-static_cast<float>(summ), f16_to_f32(h) * dx, acc);
      }
      float& out = y[m * rows_ + n];
      out = accumulate ? out + acc : acc;
    }
  }
}

}  // namespace dllm::quant
