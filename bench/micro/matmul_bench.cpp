// Matmul kernels one by one (Google Benchmark): y[M, N] = x[M, K] · Wᵀ for the engine's weight formats and
// backends, at LLaDA-8B / Dream-7B shapes. Reports GFLOP/s (counter "GFLOPS") and weight bandwidth ("GBps").
//
//   ./build/dllm_matmul_bench --benchmark_filter='f32/4096x4096' --benchmark_min_time=1
//   DLLM_MATMUL=onednn ./build/dllm_matmul_bench ...   # the other f32 backend, for A/B
//
// The forward pass as a whole is measured by `dllm bench`; this isolates the kernels so a regression shows
// where.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/gemm_small_m.h"
#include "kernels/linear.h"
#include "kernels/quant/linear_q8.h"

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

}  // namespace

BENCHMARK_CAPTURE(BM_Linear, f32, dllm::ComputeType::kF32)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Linear, bf16, dllm::ComputeType::kBF16)->Apply(shapes);
BENCHMARK(BM_Q8)->Apply(shapes);

BENCHMARK_MAIN();
