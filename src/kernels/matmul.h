// A weight matrix of the transformer, whichever way it is held: an f32/bf16 `Linear` (oneDNN / OpenBLAS), 8-bit
// Q8_0 weights run by quant::LinearQ8 (GGUF files loaded with WeightFormat::kQ8 or kAuto), or GGUF Q8_0 / Q4_K blocks
// multiplied in place by quant::LinearGgml (a view of the mapped file, or blocks it owns). Same call either way:
//   y[M, N] (+)= x[M, K] · Wᵀ
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <variant>

#include "kernels/linear.h"
#include "kernels/quant/linear_ggml.h"
#include "kernels/quant/linear_q8.h"

namespace dllm {

class MatMul {
 public:
  MatMul() = default;
  MatMul(Linear linear) : impl_(std::move(linear)) {}  // NOLINT: implicit, the loaders assign Linears
  // Shared so that a tied token_embd can be the embedding table and the head from one 8-bit copy.
  MatMul(std::shared_ptr<const quant::LinearQ8> q8);    // NOLINT
  MatMul(quant::LinearQ8 q8);                            // NOLINT
  // GGUF blocks run in place (shared: a tied token_embd can be the embedding table and the head).
  MatMul(std::shared_ptr<const quant::LinearGgml> blocks);  // NOLINT
  MatMul(quant::LinearGgml blocks);                         // NOLINT

  void forward(const float* x, int64_t rows, float* y, bool accumulate = false) const;

  bool is_q8() const { return std::holds_alternative<std::shared_ptr<const quant::LinearQ8>>(impl_); }
  const std::shared_ptr<const quant::LinearQ8>& q8() const;  // is_q8() only
  bool is_ggml() const { return std::holds_alternative<std::shared_ptr<const quant::LinearGgml>>(impl_); }
  const std::shared_ptr<const quant::LinearGgml>& ggml() const;  // is_ggml() only
  int64_t out_features() const;
  int64_t in_features() const;
  size_t weight_bytes() const;

 private:
  template <class F>
  auto with(F&& f) const;  // f(the Linear, the LinearQ8 or the LinearGgml)
  std::variant<Linear, std::shared_ptr<const quant::LinearQ8>, std::shared_ptr<const quant::LinearGgml>> impl_;
};

}  // namespace dllm
