// A weight matrix of the transformer, whichever way it is held: an f32/bf16 `Linear` (oneDNN / OpenBLAS),
// 8-bit Q8_0 weights run by quant::LinearQ8 (GGUF files loaded with WeightFormat::kQ8 or kAuto), or GGUF Q8_0
// / Q4_K blocks multiplied in place by quant::LinearGgml (a view of the mapped file, or blocks it owns), or
// GGUF Q8_0 / Q4_0 blocks repacked into 16-row panels by quant::LinearPacked. Same call either way:
//   y[M, N] (+)= x[M, K] · Wᵀ
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>

#include "kernels/linear.h"
#include "kernels/quant/linear_ggml.h"
#include "kernels/quant/linear_packed.h"
#include "kernels/quant/linear_q8.h"

namespace dllm {

class MatMul {
 public:
  MatMul() = default;
  MatMul(Linear linear) : impl_(std::move(linear)) {}  // NOLINT: implicit, the loaders assign Linears
  // Shared so that a tied token_embd can be the embedding table and the head from one 8-bit copy.
  MatMul(std::shared_ptr<const quant::LinearQ8> q8);  // NOLINT
  MatMul(quant::LinearQ8 q8);                         // NOLINT
  // GGUF blocks run in place (shared: a tied token_embd can be the embedding table and the head).
  MatMul(std::shared_ptr<const quant::LinearGgml> blocks);  // NOLINT
  MatMul(quant::LinearGgml blocks);                         // NOLINT
  // Q8_0 / Q4_0 blocks repacked into 16-row panels at load (shared like the others).
  MatMul(std::shared_ptr<const quant::LinearPacked> packed);  // NOLINT
  MatMul(quant::LinearPacked packed);                         // NOLINT

  void forward(const float* x, int64_t rows, float* y, bool accumulate = false) const;
  // ys[i] = x · ws[i]ᵀ for matrices of one input (q, k, v; gate, up): in one parallel region when all are
  // packed panels of one type and width (quant::LinearPacked::forward_group), else one after another. The
  // same bits either way.
  static void forward_group(std::span<const MatMul* const> ws, const float* x, int64_t rows,
                            std::span<float* const> ys);
  // forward_group's work for thread `thread` of `threads`, called by every thread of a region the caller
  // runs: matrices that can_share_group only (packed panels of one type and width: quant::LinearPacked::
  // forward_group_share; or 16-bit weights on the gemv kernel: Linear::forward_share), <= 4 rows.
  static constexpr int64_t kShareRows = 4;
  static bool can_share_group(std::span<const MatMul* const> ws);
  static void forward_group_share(std::span<const MatMul* const> ws, const float* x, int64_t rows,
                                  std::span<float* const> ys, bool accumulate, int thread, int threads);
  // Row `row` of W as f32 (an embedding lookup in a quantized table); fails for a Linear.
  void dequantize_row(int64_t row, float* out) const;
  // The weight for a device backend's copy, as [out, in] row-major values into `out`: a Linear's in the type it
  // holds (F32 / BF16 / F16), quantized ones dequantised to F32. Returns the type.
  DType export_rows(std::vector<uint8_t>& out) const;
  // Another MatMul over the same quantized weights (a tied head and its embedding table); fails for a Linear.
  MatMul share() const;
  bool same_weights(const MatMul& other) const;  // both share one quantized object

  bool is_q8() const { return std::holds_alternative<std::shared_ptr<const quant::LinearQ8>>(impl_); }
  const std::shared_ptr<const quant::LinearQ8>& q8() const;  // is_q8() only
  bool is_ggml() const { return std::holds_alternative<std::shared_ptr<const quant::LinearGgml>>(impl_); }
  const std::shared_ptr<const quant::LinearGgml>& ggml() const;  // is_ggml() only
  bool is_packed() const { return std::holds_alternative<std::shared_ptr<const quant::LinearPacked>>(impl_); }
  const std::shared_ptr<const quant::LinearPacked>& packed() const;  // is_packed() only
  int64_t out_features() const;
  int64_t in_features() const;
  size_t weight_bytes() const;
  // A Linear held in place (Linear::in_place): reorder it into its faster layout (Linear::prepare).
  size_t prepare() const;
  bool preparable() const;  // a Linear that prepare() would reorder
  // What its products run as, for the load line and --json: "f32", "bf16", "f16", or the quantized kind
  // ("q4_k blocks, int8 products", ...).
  std::string runs_as() const;

 private:
  static bool grouping_enabled();
  template <class F>
  auto with(F&& f) const;  // f(the Linear, the LinearQ8, the LinearGgml or the LinearPacked)
  std::variant<Linear, std::shared_ptr<const quant::LinearQ8>, std::shared_ptr<const quant::LinearGgml>,
               std::shared_ptr<const quant::LinearPacked>>
      impl_;
};

}  // namespace dllm
