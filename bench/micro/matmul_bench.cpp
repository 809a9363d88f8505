// Matmul kernels one by one (Google Benchmark): y[M, N] = x[M, K] · Wᵀ for the engine's weight formats and
// backends, at LLaDA-8B / Dream-7B shapes. Reports GFLOP/s (counter "GFLOPS") and weight bandwidth ("GBps").
//
//   ./build/dllm_matmul_bench --benchmark_filter='f32/4096x4096' --benchmark_min_time=1
//   DLLM_MATMUL=onednn ./build/dllm_matmul_bench ...   # the other f32 backend, for A/B
//   ./build/dllm_matmul_bench --benchmark_filter='moe/'   # f32 vs LinearQ8 vs GGUF Q8_0 / Q4_K / Q6_K in
//   place
//   ./build/dllm_matmul_bench --benchmark_filter='target/' --benchmark_repetitions=5   # issue 14's targets:
//   f32 vs packed Q8_0 / Q4_0 / Q4_K vs in-place Q8_0 / Q4_K / Q6_K at 4096 x 4096, M = 1, 32, 256
//
// The moe/ cases take {M, N, K, cold}: one LLaDA2-mini expert (512x2048 gate/up, 2048x512 down) and 4096x4096
// at M = 1, 2, 8, 32. cold = 1 rotates over copies of the weights totalling >= 512 MiB, so each call reads
// its weights from memory (as a mixture-of-experts layer does: 256 experts a layer), not from a cache (L3 is
// 260 MiB here); cold = 0 repeats one copy (cache-resident where it fits).
//
// The forward pass as a whole is measured by `dllm bench`; this isolates the kernels so a regression shows
// where.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "kernels/gemm_small_m.h"
#include "kernels/linear.h"
#include "kernels/peak.h"
#include "kernels/quant/linear_ggml.h"
#include "kernels/quant/linear_packed.h"
#include "kernels/quant/linear_q8.h"
#include "kernels/quant/quant.h"

namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 0.02f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Arguments: {M, N, K}.
void report(benchmark::State& state, int64_t m, int64_t n, int64_t k, double weight_bytes) {
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * m * n * k * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["GBps"] = benchmark::Counter(weight_bytes * iters / 1e9, benchmark::Counter::kIsRate);
}

void BM_Linear(benchmark::State& state, dllm::ComputeType compute) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const auto w = random_floats(n * k, 1);
  const auto x = random_floats(m * k, 2);
  std::vector<float> y(static_cast<size_t>(m * n));
  dllm::Linear linear(w.data(), dllm::DType::kF32, n, k, compute);
  for (auto _ : state) {
    linear.forward(x.data(), m, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  report(state, m, n, k, static_cast<double>(linear.weight_bytes()));
}

void BM_Q8(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const auto w = random_floats(n * k, 1);
  const auto x = random_floats(m * k, 2);
  std::vector<float> y(static_cast<size_t>(m * n));
  const auto q8 = dllm::quant::LinearQ8::from_f32(w.data(), n, k);
  for (auto _ : state) {
    q8.forward(x.data(), m, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  report(state, m, n, k, static_cast<double>(q8.weight_bytes()));
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t m : {1, 8, 32, 64, 256}) {
    b->Args({m, 4096, 4096});   // LLaDA-8B attention projection
    b->Args({m, 12288, 4096});  // LLaDA-8B MLP up / gate
  }
  b->Args({8, 152064, 3584});  // Dream-7B head at a cached block of 8
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

// ---- moe/: {M, N, K, cold}
// ----------------------------------------------------------------------------------------

constexpr size_t kColdBytes = size_t{512} << 20;

int copies_for(benchmark::State& state, size_t weight_bytes) {
  if (state.range(3) == 0) return 1;
  return static_cast<int>(std::clamp<size_t>((kColdBytes + weight_bytes - 1) / weight_bytes, 1, 4096));
}

// Runs forward over the copies in turn; GBps counts the bytes of weights each call reads.
template <class W>
void run_copies(benchmark::State& state, const std::vector<W>& ws) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const auto x = random_floats(m * k, 2);
  std::vector<float> y(static_cast<size_t>(m * n));
  size_t i = 0;
  for (auto _ : state) {
    ws[i].forward(x.data(), m, y.data());
    benchmark::DoNotOptimize(y.data());
    i = i + 1 == ws.size() ? 0 : i + 1;
  }
  report(state, m, n, k, static_cast<double>(ws[0].weight_bytes()));
  state.counters["copies"] = static_cast<double>(ws.size());
}

void BM_MoeF32(benchmark::State& state) {
  const int64_t n = state.range(1), k = state.range(2);
  const auto w = random_floats(n * k, 1);
  std::vector<dllm::Linear> ws;
  ws.emplace_back(w.data(), dllm::DType::kF32, n, k, dllm::ComputeType::kF32);
  for (int c = copies_for(state, ws[0].weight_bytes()); static_cast<int>(ws.size()) < c;)
    ws.emplace_back(w.data(), dllm::DType::kF32, n, k, dllm::ComputeType::kF32);
  run_copies(state, ws);
}

// GGUF blocks of the random weights, quantised once per (type, shape) (ggml's Q4_K quantiser is slow).
const std::vector<uint8_t>& blocks_of(dllm::GgmlType type, int64_t n, int64_t k) {
  static std::map<std::tuple<dllm::GgmlType, int64_t, int64_t>, std::vector<uint8_t>> cache;
  auto& b = cache[{type, n, k}];
  if (b.empty()) {
    const auto w = random_floats(n * k, 1);
    b.resize(dllm::ggml_row_bytes(type, k) * static_cast<size_t>(n));
    dllm::quant::quantize(type, w.data(), b.data(), n * k);
  }
  return b;
}

void BM_MoeQ8(benchmark::State& state) {  // LinearQ8: Q8_0 copied into int8 + f32 scales
  const int64_t n = state.range(1), k = state.range(2);
  const auto& blocks = blocks_of(dllm::GgmlType::kQ8_0, n, k);
  std::vector<dllm::quant::LinearQ8> ws{dllm::quant::LinearQ8::from_q8_0(blocks.data(), n, k)};
  for (int c = copies_for(state, ws[0].weight_bytes()); static_cast<int>(ws.size()) < c;)
    ws.push_back(dllm::quant::LinearQ8::from_q8_0(blocks.data(), n, k));
  run_copies(state, ws);
}

// LinearGgml views into one buffer of copies of the blocks (as experts lie in a mapped file).
struct GgmlKernelView {
  dllm::quant::LinearGgml w;
  dllm::quant::LinearGgml::Kernel kernel;
  void forward(const float* x, int64_t m, float* y) const { w.forward(kernel, x, m, y); }
  size_t weight_bytes() const { return w.weight_bytes(); }
};

void BM_MoeGgml(benchmark::State& state, dllm::GgmlType type, dllm::quant::LinearGgml::Kernel kernel) {
  if (!dllm::quant::LinearGgml::supported(kernel)) {
    state.SkipWithError("this CPU cannot run the kernel");
    return;
  }
  const int64_t n = state.range(1), k = state.range(2);
  const auto& blocks = blocks_of(type, n, k);
  const int copies = copies_for(state, blocks.size());
  std::vector<uint8_t> file(blocks.size() * static_cast<size_t>(copies));
  for (int c = 0; c < copies; ++c) std::memcpy(file.data() + c * blocks.size(), blocks.data(), blocks.size());
  std::vector<GgmlKernelView> ws;
  for (int c = 0; c < copies; ++c)
    ws.push_back({dllm::quant::LinearGgml::view(type, file.data() + c * blocks.size(), n, k), kernel});
  run_copies(state, ws);
}

// LinearPacked: the blocks repacked into 16-row panels, one copy per rotation slot.
struct PackedKernel {
  dllm::quant::LinearPacked w;
  void forward(const float* x, int64_t m, float* y) const { w.forward(x, m, y); }
  size_t weight_bytes() const { return w.weight_bytes(); }
};

void BM_Packed(benchmark::State& state, dllm::GgmlType type, dllm::quant::LinearPacked::Kernel kernel) {
  if (!dllm::quant::LinearPacked::supported(kernel)) {
    state.SkipWithError("this CPU cannot run the kernel");
    return;
  }
  const int64_t n = state.range(1), k = state.range(2);
  const auto& blocks = blocks_of(type, n, k);
  std::vector<PackedKernel> ws;
  for (int c = copies_for(state, blocks.size()); static_cast<int>(ws.size()) < c;)
    ws.push_back({dllm::quant::LinearPacked::pack(type, blocks.data(), n, k, kernel)});
  run_copies(state, ws);
}

// target/: issue 14's targets, 4096 x 4096, cold weights, M = 1 (bandwidth), 32 and 256 (compute).
void target_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t m : {1, 32, 256}) b->Args({m, 4096, 4096, 1});
  b->ArgNames({"M", "N", "K", "cold"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

// token/: one generated token's matrices of Qwen2.5-0.5B (d = 896, ffn 4864), one role at a time, cold, M =
// 1: q (896), k / v (128), o (896 x 896), gate or up (4864 x 896), down (896 x 4864). Small matrices show the
// per-call cost (thread start, first lines' latency) that `dllm bench --ar` reports as their low GB/s.
void token_shapes(benchmark::internal::Benchmark* b) {
  for (auto [n, k] :
       {std::pair<int64_t, int64_t>{896, 896}, {128, 896}, {4864, 896}, {896, 4864}, {896, 4608}})
    for (int64_t cold : {1, 0}) b->Args({1, n, k, cold});
  b->ArgNames({"M", "N", "K", "cold"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

void moe_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t cold : {1, 0})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{512, 2048}, {2048, 512}, {4096, 4096}})
      for (int64_t m : {1, 2, 8, 32}) b->Args({m, n, k, cold});
  b->ArgNames({"M", "N", "K", "cold"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

// This machine's memory read bandwidth (all OpenMP threads), what the cold cases' GBps compare with.
void BM_MemoryRead(benchmark::State& state) {
  double gbs = 0;
  for (auto _ : state) gbs = dllm::measure_memory_read_gbs(0.5);
  state.counters["GBps"] = gbs;
}
BENCHMARK(BM_MemoryRead)->Name("moe/memory_read")->Iterations(1)->Unit(benchmark::kMillisecond);

using Kernel = dllm::quant::LinearGgml::Kernel;
BENCHMARK(BM_MoeF32)->Name("moe/f32")->Apply(moe_shapes);
BENCHMARK(BM_MoeQ8)->Name("moe/LinearQ8")->Apply(moe_shapes);
BENCHMARK_CAPTURE(BM_MoeGgml, q8_0, dllm::GgmlType::kQ8_0, Kernel::kAuto)
    ->Name("moe/ggml_q8_0")
    ->Apply(moe_shapes);
BENCHMARK_CAPTURE(BM_MoeGgml, q4_k, dllm::GgmlType::kQ4_K, Kernel::kAuto)
    ->Name("moe/ggml_q4_k")
    ->Apply(moe_shapes);
BENCHMARK_CAPTURE(BM_MoeGgml, q4_0, dllm::GgmlType::kQ4_0, Kernel::kAuto)
    ->Name("moe/ggml_q4_0")
    ->Apply(moe_shapes);
BENCHMARK_CAPTURE(BM_MoeGgml, q6_k, dllm::GgmlType::kQ6_K, Kernel::kAuto)
    ->Name("moe/ggml_q6_k")
    ->Apply(moe_shapes);
BENCHMARK_CAPTURE(BM_MoeGgml, q8_0_avx2, dllm::GgmlType::kQ8_0, Kernel::kAvx2)
    ->Name("moe/ggml_q8_0_avx2")
    ->Apply(moe_shapes);
BENCHMARK_CAPTURE(BM_MoeGgml, q4_k_avx2, dllm::GgmlType::kQ4_K, Kernel::kAvx2)
    ->Name("moe/ggml_q4_k_avx2")
    ->Apply(moe_shapes);

using PackedKernelId = dllm::quant::LinearPacked::Kernel;
BENCHMARK(BM_MoeF32)->Name("target/f32")->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_Packed, q8_0, dllm::GgmlType::kQ8_0, PackedKernelId::kAuto)
    ->Name("target/packed_q8_0")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_Packed, q4_0, dllm::GgmlType::kQ4_0, PackedKernelId::kAuto)
    ->Name("target/packed_q4_0")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_Packed, q4_k, dllm::GgmlType::kQ4_K, PackedKernelId::kAuto)
    ->Name("target/packed_q4_k")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_Packed, q4_k_avx2, dllm::GgmlType::kQ4_K, PackedKernelId::kAvx2)
    ->Name("target/packed_q4_k_avx2")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_Packed, q8_0_avx2, dllm::GgmlType::kQ8_0, PackedKernelId::kAvx2)
    ->Name("target/packed_q8_0_avx2")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_Packed, q4_0_avx2, dllm::GgmlType::kQ4_0, PackedKernelId::kAvx2)
    ->Name("target/packed_q4_0_avx2")
    ->Apply(target_shapes);
// AVX-VNNI (VEX, 256-bit): the set CPUs with AVX-VNNI and no AVX-512 run; runs here wherever cpuid has it.
BENCHMARK_CAPTURE(BM_Packed, q8_0_avx_vnni, dllm::GgmlType::kQ8_0, PackedKernelId::kAvxVnni)
    ->Name("target/packed_q8_0_avx_vnni")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_Packed, q4_0_avx_vnni, dllm::GgmlType::kQ4_0, PackedKernelId::kAvxVnni)
    ->Name("target/packed_q4_0_avx_vnni")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_Packed, q4_k_avx_vnni, dllm::GgmlType::kQ4_K, PackedKernelId::kAvxVnni)
    ->Name("target/packed_q4_k_avx_vnni")
    ->Apply(target_shapes);
// AVX512_VNNI and AMX_INT8 (16 activation rows per tile multiply; the rest of the rows on AVX512_VNNI).
BENCHMARK_CAPTURE(BM_Packed, q8_0_avx512_vnni, dllm::GgmlType::kQ8_0, PackedKernelId::kAvx512Vnni)
    ->Name("target/packed_q8_0_avx512_vnni")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_Packed, q4_0_avx512_vnni, dllm::GgmlType::kQ4_0, PackedKernelId::kAvx512Vnni)
    ->Name("target/packed_q4_0_avx512_vnni")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_Packed, q8_0_amx, dllm::GgmlType::kQ8_0, PackedKernelId::kAmx)
    ->Name("target/packed_q8_0_amx")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_Packed, q4_0_amx, dllm::GgmlType::kQ4_0, PackedKernelId::kAmx)
    ->Name("target/packed_q4_0_amx")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_MoeGgml, q4_k_avx2, dllm::GgmlType::kQ4_K, Kernel::kAvx2)
    ->Name("target/ggml_q4_k_avx2")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_MoeGgml, q4_k_avx_vnni, dllm::GgmlType::kQ4_K, Kernel::kAvxVnni)
    ->Name("target/ggml_q4_k_avx_vnni")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_MoeGgml, q8_0, dllm::GgmlType::kQ8_0, Kernel::kAuto)
    ->Name("target/ggml_q8_0")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_MoeGgml, q4_k, dllm::GgmlType::kQ4_K, Kernel::kAuto)
    ->Name("target/ggml_q4_k")
    ->Apply(target_shapes);
BENCHMARK_CAPTURE(BM_MoeGgml, q6_k, dllm::GgmlType::kQ6_K, Kernel::kAuto)
    ->Name("target/ggml_q6_k")
    ->Apply(target_shapes);

BENCHMARK_CAPTURE(BM_Packed, q4_0, dllm::GgmlType::kQ4_0, PackedKernelId::kAuto)
    ->Name("token/packed_q4_0")
    ->Apply(token_shapes);
BENCHMARK_CAPTURE(BM_Packed, q4_k, dllm::GgmlType::kQ4_K, PackedKernelId::kAuto)
    ->Name("token/packed_q4_k")
    ->Apply(token_shapes);
BENCHMARK_CAPTURE(BM_Packed, q8_0, dllm::GgmlType::kQ8_0, PackedKernelId::kAuto)
    ->Name("token/packed_q8_0")
    ->Apply(token_shapes);

BENCHMARK_CAPTURE(BM_Linear, f32, dllm::ComputeType::kF32)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Linear, bf16, dllm::ComputeType::kBF16)->Apply(shapes);
BENCHMARK(BM_Q8)->Apply(shapes);

BENCHMARK_MAIN();
