// The CPU backend: the forward's ops on host memory through src/kernels (oneDNN / OpenBLAS products, the AVX2
// / AVX-512 kernels), exactly the calls the forward made before the seam, so the same bits and the same
// speed.
#pragma once

#include <vector>

#include "backend/backend.h"

namespace dllm {

class CpuBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string describe() const override;
  Tensor activation(Slot slot, int64_t rows, int64_t cols) override;
  float* host(const Tensor& t) const override { return static_cast<float*>(t.storage); }
  void begin(const ForwardSetup& setup) override { setup_ = setup; }
  void finish() override {}
  void write(const Tensor& t, const float* values) override;
  void read(const Tensor& t, int64_t first, int64_t count, float* out) override;
  void logit_stats(const Tensor& t, int64_t rows, LogitStats* out) override;
  void rms_norm(const Tensor& x, std::span<const float> w, float eps, const Tensor& out) override;
  void matmul(const MatMul& w, const Tensor& x, const Tensor& y, bool accumulate) override;
  void matmul_group(std::span<const MatMul* const> ws, const Tensor& x, std::span<const Tensor> ys) override;
  void add_bias(const Tensor& x, std::span<const float> bias) override;
  void rope(const Tensor& x, int64_t heads) override;
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionShape& shape,
                 const Tensor& out) override;
  void zero_invalid_rows(const Tensor& x) override;
  void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void add(const Tensor& x, const Tensor& y) override;
  void copy_rows(const Tensor& src, int64_t src_row, const Tensor& dst, int64_t dst_row,
                 int64_t count) override;
  void experts(std::span<const ExpertRun> runs, const Tensor& h, const Tensor& out) override;
  void kv_reset(KvCache& cache, int64_t layers, int64_t batch, int64_t len, int64_t kv_dim) override;
  void kv_write(KvCache& cache, int64_t layer, const Tensor& k, const Tensor& v, int64_t batch, int64_t seq,
                int64_t at) override;
  Tensor kv_keys(KvCache& cache, int64_t layer, int64_t rows) override;
  Tensor kv_values(KvCache& cache, int64_t layer, int64_t rows) override;
  void kv_truncate(KvCache& cache, int64_t layer, int64_t rows) override;

 private:
  static float* f(const Tensor& t) { return static_cast<float*>(t.storage); }
  ForwardSetup setup_;
  std::vector<float> slots_[static_cast<int>(Slot::kCount)];
  std::vector<float> expert_rows_;  // each run's output rows, before the weighted sum
};

}  // namespace dllm
