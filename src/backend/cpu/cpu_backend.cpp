#include "backend/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "backend/logit_stats.h"
#include "core/error.h"
#include "kernels/profile.h"

namespace dllm {

std::string CpuBackend::describe() const {
  return "cpu (" + std::to_string(omp_get_max_threads()) + " threads)";
}

Tensor CpuBackend::activation(Slot slot, int64_t rows, int64_t cols) {
  std::vector<float>& s = slots_[static_cast<int>(slot)];
  if (static_cast<int64_t>(s.size()) < rows * cols) s.resize(static_cast<size_t>(rows * cols));
  return {s.data(), rows, cols};
}

void CpuBackend::write(const Tensor& t, const float* values) {
  if (values != f(t)) std::copy_n(values, t.size(), f(t));
}

void CpuBackend::read(const Tensor& t, int64_t first, int64_t count, float* out) {
  std::copy_n(f(t) + first * t.cols, count * t.cols, out);
}

void CpuBackend::logit_stats(const Tensor& t, int64_t rows, LogitStats* out) {
  logit_stats_host(f(t), rows, t.cols, out);
}

void CpuBackend::rms_norm(const Tensor& x, std::span<const float> w, float eps, const Tensor& out) {
  dllm::rms_norm(f(x), w.data(), x.rows, x.cols, eps, f(out));
}

void CpuBackend::matmul(const MatMul& w, const Tensor& x, const Tensor& y, bool accumulate) {
  w.forward(f(x), x.rows, f(y), accumulate);
}

void CpuBackend::matmul_group(std::span<const MatMul* const> ws, const Tensor& x,
                              std::span<const Tensor> ys) {
  std::vector<float*> out;
  for (const Tensor& y : ys) out.push_back(f(y));
  MatMul::forward_group(ws, f(x), x.rows, out);
}

void CpuBackend::add_bias(const Tensor& x, std::span<const float> bias) {
  dllm::add_bias(f(x), bias.data(), x.rows, x.cols);
}

void CpuBackend::rope(const Tensor& x, int64_t heads) {
  rope_neox(f(x), x.rows, heads, setup_.positions.data(), *setup_.rope, x.cols / heads);
}

void CpuBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionShape& s,
                           const Tensor& out) {
  dllm::attention(f(q), f(k), f(v), s.batch, s.q_len, s.kv_len, s.heads, s.kv_heads, s.head_dim,
                  setup_.key_valid.empty() ? nullptr : setup_.key_valid.data(), f(out), s.block, s.q_offset);
}

void CpuBackend::zero_invalid_rows(const Tensor& x) {
  for (size_t r = 0; r < setup_.query_valid.size(); ++r)
    if (!setup_.query_valid[r]) std::fill_n(f(x) + static_cast<int64_t>(r) * x.cols, x.cols, 0.0f);
}

void CpuBackend::silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  dllm::silu_mul(f(gate), f(up), gate.size(), f(out));
}

void CpuBackend::add(const Tensor& x, const Tensor& y) {
  float* a = f(x);
  const float* b = f(y);
  for (int64_t i = 0; i < x.size(); ++i) a[i] += b[i];
}

void CpuBackend::copy_rows(const Tensor& src, int64_t src_row, const Tensor& dst, int64_t dst_row,
                           int64_t count) {
  std::copy_n(f(src) + src_row * src.cols, count * src.cols, f(dst) + dst_row * dst.cols);
}

// The chosen experts run in parallel, one expert per thread at a time (each expert's matmuls single-threaded:
// the nested parallel regions inside them run on one thread): with 1-3 rows per expert, splitting one small
// matmul over the threads cost a fork/join per matmul (3 per expert, ~375 per layer-step for a 32-token
// block) and left each thread a sliver of rows. Outputs land in per-run rows; the weighted sum is then taken
// serially in the runs' order, so the result does not depend on the thread count.
void CpuBackend::experts(std::span<const ExpertRun> runs, const Tensor& h, const Tensor& out) {
  const int64_t d = h.cols, count = static_cast<int64_t>(runs.size());
  std::vector<int64_t> first_row(runs.size() + 1, 0);
  for (size_t a = 0; a < runs.size(); ++a)
    first_row[a + 1] = first_row[a] + static_cast<int64_t>(runs[a].rows.size());
  // Longest first (most rows), so that the last experts to start are the short ones and no thread idles long.
  std::vector<int64_t> order(runs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return runs[a].rows.size() > runs[b].rows.size(); });
  expert_rows_.resize(static_cast<size_t>(first_row.back() * d));
  const float* hx = f(h);
  {
    ScopedKernelTimer timer(KernelKind::kMatmul);  // the timers inside the parallel region do not count
#pragma omp parallel if (count > 1)
    {
      std::vector<float> in, g, u;
#pragma omp for schedule(dynamic, 1)
      for (int64_t i = 0; i < count; ++i) {
        const int64_t a = order[i];
        const ExpertRun& run = runs[a];
        const int64_t m = static_cast<int64_t>(run.rows.size()), width = run.gate->out_features();
        in.resize(static_cast<size_t>(m * d));
        g.resize(static_cast<size_t>(m * width));
        u.resize(g.size());
        for (int64_t r = 0; r < m; ++r) std::copy_n(hx + run.rows[r] * d, d, in.data() + r * d);
        if (run.gate->is_ggml() && run.up->is_ggml()) {  // in quantised once for both
          quant::LinearGgml::forward_shared_input(*run.gate->ggml(), g.data(), *run.up->ggml(), u.data(),
                                                  in.data(), m);
        } else {
          run.gate->forward(in.data(), m, g.data());
          run.up->forward(in.data(), m, u.data());
        }
        dllm::silu_mul(g.data(), u.data(), m * width, g.data());
        run.down->forward(g.data(), m, expert_rows_.data() + first_row[a] * d);
      }
    }
  }
  float* y0 = f(out);
  std::fill_n(y0, out.size(), 0.0f);
  for (size_t a = 0; a < runs.size(); ++a) {
    const ExpertRun& run = runs[a];
    for (size_t i = 0; i < run.rows.size(); ++i) {
      float* y = y0 + run.rows[i] * d;
      const float* p = expert_rows_.data() + (first_row[a] + static_cast<int64_t>(i)) * d;
      const float weight = run.weights[i];
      for (int64_t j = 0; j < d; ++j) y[j] += weight * p[j];
    }
  }
}

void CpuBackend::kv_reset(KvCache& cache, int64_t layers, int64_t batch, int64_t len, int64_t kv_dim) {
  cache.reset(layers, batch, len, kv_dim);
}

void CpuBackend::kv_write(KvCache& cache, int64_t layer, const Tensor& k, const Tensor& v, int64_t batch,
                          int64_t seq, int64_t at) {
  std::vector<float>& ck = cache.k[static_cast<size_t>(layer)];
  std::vector<float>& cv = cache.v[static_cast<size_t>(layer)];
  const int64_t dim = cache.kv_dim, len = cache.seq_len;
  const auto needed = static_cast<size_t>(((batch - 1) * len + at + seq) * dim);
  if (ck.size() < needed) {  // the block cache grows
    ck.resize(needed);
    cv.resize(needed);
  }
  for (int64_t b = 0; b < batch; ++b) {
    std::copy_n(f(k) + b * seq * dim, seq * dim, ck.data() + (b * len + at) * dim);
    std::copy_n(f(v) + b * seq * dim, seq * dim, cv.data() + (b * len + at) * dim);
  }
}

Tensor CpuBackend::kv_keys(KvCache& cache, int64_t layer, int64_t rows) {
  return {cache.k[static_cast<size_t>(layer)].data(), rows, cache.kv_dim};
}

Tensor CpuBackend::kv_values(KvCache& cache, int64_t layer, int64_t rows) {
  return {cache.v[static_cast<size_t>(layer)].data(), rows, cache.kv_dim};
}

void CpuBackend::kv_truncate(KvCache& cache, int64_t layer, int64_t rows) {
  cache.k[static_cast<size_t>(layer)].resize(static_cast<size_t>(rows * cache.kv_dim));
  cache.v[static_cast<size_t>(layer)].resize(static_cast<size_t>(rows * cache.kv_dim));
}

}  // namespace dllm
