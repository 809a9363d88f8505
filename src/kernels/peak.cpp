#include "kernels/peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/amx.h"
#include "kernels/quant/linear_ggml.h"

namespace dllm {

namespace {

constexpr int kChains = 12;  // enough independent FMAs to cover latency x ports
constexpr int64_t kInner = 1 << 16;

bool has_avx512() {
  return __builtin_cpu_supports("avx512f");
}

double elapsed_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// FLOPs one thread does in `seconds` of independent 256-bit FMA chains.
double fma_flops_avx2(double seconds) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(0.001f * c);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  double flops = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (elapsed_since(t0) < seconds) {
    for (int64_t i = 0; i < kInner; ++i)
      for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    flops += 2.0 * 8 * kChains * kInner;
  }
  float sink = 0;
  for (int c = 0; c < kChains; ++c) sink += _mm256_cvtss_f32(acc[c]);
  return sink == 12345.0f ? flops + 1 : flops;  // keeps the loop alive
}

// The same with 512-bit FMAs. AVX-512 is not in the build's baseline (x86-64-v3): compiled for it here and
// called only where cpuid says the CPU has it. OpenBLAS and oneDNN multiply with 512-bit FMAs there, so the
// AVX2 loop would understate the peak (a forward measured at 120-137% of it on an AVX-512 Xeon).
__attribute__((target("avx512f"))) double fma_flops_avx512(double seconds) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * c);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  double flops = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (elapsed_since(t0) < seconds) {
    for (int64_t i = 0; i < kInner; ++i)
      for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    flops += 2.0 * 16 * kChains * kInner;
  }
  float sink = 0;
  for (int c = 0; c < kChains; ++c) sink += _mm512_cvtss_f32(acc[c]);
  return sink == 12345.0f ? flops + 1 : flops;
}

bool has_vnni() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
}

// Products one thread does in `seconds` of independent vpmaddubsw + vpmaddwd + vpaddd chains (256-bit).
double int8_products_avx2(double seconds) {
  __m256i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_epi32(c);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5), ones = _mm256_set1_epi16(1);
  double products = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (elapsed_since(t0) < seconds) {
    for (int64_t i = 0; i < kInner; ++i)
      for (int c = 0; c < kChains; ++c)
        acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
    products += 32.0 * kChains * kInner;
  }
  // Unsigned: the accumulators have wrapped long since, and a signed sum of them would overflow (UB).
  uint32_t sink = 0;
  for (int c = 0; c < kChains; ++c) sink += static_cast<uint32_t>(_mm256_extract_epi32(acc[c], 0));
  return sink == 12345 ? products + 1 : products;
}

__attribute__((target("avx512f,avx512vnni"))) double int8_products_vnni(double seconds) {
  __m512i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
  double products = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (elapsed_since(t0) < seconds) {
    for (int64_t i = 0; i < kInner; ++i)
      for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
    products += 64.0 * kChains * kInner;
  }
  uint32_t sink = 0;  // unsigned, as above
  alignas(64) int32_t lanes[16];
  for (int c = 0; c < kChains; ++c) {
    _mm512_store_si512(lanes, acc[c]);
    sink += static_cast<uint32_t>(lanes[0]);
  }
  return sink == 12345 ? products + 1 : products;
}

// The AMX peak loops' tiles, on this thread: all 8 registers 16 rows x 64 bytes, tmm4 = a and tmm5 = b (1 KiB
// each), tmm0-3 zeroed as four independent accumulators. The caller releases the tiles after.
__attribute__((target("amx-tile"))) void start_full_tiles(const void* a, const void* b) {
  AmxTileConfig config;
  for (int t = 0; t < 8; ++t) config.rows[t] = 16, config.colsb[t] = 64;
  amx_load_tile_config(config);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, b, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}

// AMX: four independent C tiles, each tdpbssd 16 x 16 x 64 products from the same A and B (full-size tiles,
// the unit's best case).
__attribute__((target("amx-tile,amx-int8"))) double int8_products_amx(double seconds) {
  alignas(64) int8_t a[16 * 64], b[16 * 64];
  for (int i = 0; i < 16 * 64; ++i)
    a[i] = static_cast<int8_t>(i % 7 - 3), b[i] = static_cast<int8_t>(i % 5 - 2);
  start_full_tiles(a, b);
  double products = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (elapsed_since(t0) < seconds) {
    for (int64_t i = 0; i < kInner / 16; ++i) {
      _tile_dpbssd(0, 4, 5);
      _tile_dpbssd(1, 4, 5);
      _tile_dpbssd(2, 4, 5);
      _tile_dpbssd(3, 4, 5);
    }
    products += 4.0 * 16 * 16 * 64 * (kInner / 16);
  }
  alignas(64) int32_t c[16 * 16];
  _tile_stored(0, c, 64);
  _tile_release();
  return c[0] == 12345 ? products + 1 : products;
}

// AMX-BF16: tdpbf16ps on full tiles (16 x 16 f32 outputs, 32 bf16 pairs each: 16384 multiply-adds).
__attribute__((target("amx-tile,amx-bf16"))) double bf16_flops_amx(double seconds) {
  alignas(64) uint16_t a[16 * 32], b[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) a[i] = b[i] = 0x3f80;  // 1.0 in bf16
  start_full_tiles(a, b);
  double flops = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (elapsed_since(t0) < seconds) {
    for (int64_t i = 0; i < kInner / 16; ++i) {
      _tile_dpbf16ps(0, 4, 5);
      _tile_dpbf16ps(1, 4, 5);
      _tile_dpbf16ps(2, 4, 5);
      _tile_dpbf16ps(3, 4, 5);
    }
    flops += 2.0 * 4 * 16 * 16 * 32 * (kInner / 16);
  }
  alignas(64) float c[16 * 16];
  _tile_stored(0, c, 64);
  _tile_release();
  return c[0] == 12345.0f ? flops + 1 : flops;
}

bool use_amx() {
  return quant::LinearGgml::selected_set() == quant::LinearGgml::Kernel::kAmx;
}

}  // namespace

const char* int8_dot_peak_isa() {
  return use_amx() ? "AMX_INT8" : has_vnni() ? "AVX512_VNNI" : "AVX2";
}

double measure_int8_dot_peak_gops(double seconds) {
  const bool amx = use_amx(), vnni = has_vnni();
  double total = 0;
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : total)
  total += amx    ? int8_products_amx(seconds)
           : vnni ? int8_products_vnni(seconds)
                  : int8_products_avx2(seconds);
  return 2 * total / elapsed_since(start) / 1e9;
}

double measure_amx_bf16_peak_gflops(double seconds) {
  if (!amx_bf16_usable()) return 0;
  double total = 0;
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : total)
  total += bf16_flops_amx(seconds);
  return total / elapsed_since(start) / 1e9;
}

const char* f32_fma_peak_isa() {
  return has_avx512() ? "AVX-512" : "AVX2";
}

double measure_f32_fma_peak_gflops(double seconds) {
  const bool wide = has_avx512();
  double total_flops = 0;
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : total_flops)
  total_flops += wide ? fma_flops_avx512(seconds) : fma_flops_avx2(seconds);
  return total_flops / elapsed_since(start) / 1e9;
}

double measure_memory_read_gbs(double seconds) {
  // 1 GiB: four times the largest last-level cache seen on these machines (260 MiB, shared with other
  // tenants), so no pass is served from it; a 256 MiB buffer read up to 25% high on such a machine.
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::vector<float> buffer(n);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) buffer[i] = static_cast<float>(i & 1023);  // first touch by its reader
  std::vector<double> rates;
  double sink = 0;
  const auto start = std::chrono::steady_clock::now();
  while (rates.size() < 3 || elapsed_since(start) < seconds) {
    const auto pass_start = std::chrono::steady_clock::now();
    double pass = 0;
#pragma omp parallel for schedule(static) reduction(+ : pass)
    for (size_t c = 0; c < n; c += 4096) {
      __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
      for (size_t i = c; i < c + 4096; i += 16) {
        acc0 = _mm256_add_ps(acc0, _mm256_loadu_ps(buffer.data() + i));
        acc1 = _mm256_add_ps(acc1, _mm256_loadu_ps(buffer.data() + i + 8));
      }
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, _mm256_add_ps(acc0, acc1));
      for (float v : lanes) pass += v;
    }
    sink += pass;
    rates.push_back(static_cast<double>(n * sizeof(float)) / elapsed_since(pass_start) / 1e9);
  }
  // The median pass: one pass slowed (or sped up) by a neighbour on the shared machine does not move it.
  std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
  const double gbs = rates[rates.size() / 2];
  return sink == -1.0 ? gbs + 1 : gbs;  // keeps the sums alive
}

}  // namespace dllm
