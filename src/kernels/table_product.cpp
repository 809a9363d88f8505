#include "kernels/table_product.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/parallel.h"

namespace dllm {

void rows_times_table(const float* x, int64_t m, int64_t k, const void* table, DType dtype, int64_t n,
                      float* out) {
  if (dtype == DType::kF32) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), 1.0f, x, static_cast<blasint>(k), static_cast<const float*>(table),
                static_cast<blasint>(n), 0.0f, out, static_cast<blasint>(n));
    return;
  }
  // 16-bit tables: widen 2048 rows at a time (8 MiB at n = 1024) and accumulate their share of the sum.
  constexpr int64_t kSlab = 2048;
  std::vector<float> slab(static_cast<size_t>(std::min(k, kSlab) * n));
  const auto* bytes = static_cast<const uint8_t*>(table);
  for (int64_t r0 = 0; r0 < k; r0 += kSlab) {
    const int64_t rows = std::min(kSlab, k - r0);
    convert_to_f32(dtype, bytes + static_cast<size_t>(r0 * n) * dtype_size(dtype), slab.data(),
                   static_cast<size_t>(rows * n));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(rows), 1.0f, x + r0, static_cast<blasint>(k), slab.data(),
                static_cast<blasint>(n), r0 == 0 ? 0.0f : 1.0f, out, static_cast<blasint>(n));
  }
}

void rows_times_rows(const float* x, int64_t m, int64_t k, const std::function<void(int64_t, float*)>& row,
                     int64_t n, float* out) {
  constexpr int64_t kSlab = 2048;
  std::vector<float> slab(static_cast<size_t>(std::min(k, kSlab) * n));
  for (int64_t r0 = 0; r0 < k; r0 += kSlab) {
    const int64_t rows = std::min(kSlab, k - r0);
    parallel_for_if(rows * n > 65536, rows, [&](int64_t r) { row(r0 + r, slab.data() + r * n); });
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(rows), 1.0f, x + r0, static_cast<blasint>(k), slab.data(),
                static_cast<blasint>(n), r0 == 0 ? 0.0f : 1.0f, out, static_cast<blasint>(n));
  }
}

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  // PyTorch's tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in f32.
  constexpr float kBeta = 0.7978845608028654f, kKappa = 0.044715f;
  parallel_for_if(n > 65536, n, [&](int64_t i) {
    const float x = gate[i];
    const float inner = kBeta * (x + kKappa * x * x * x);
    out[i] = 0.5f * x * (1.0f + std::tanh(inner)) * up[i];
  });
}

}  // namespace dllm
