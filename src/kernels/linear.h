// y[M, N] (+)= x[M, K] · Wᵀ for a PyTorch-layout weight W[N, K]: oneDNN's matmul with the weight reordered once,
// at load, into the blocked layout its kernels want, or OpenBLAS's sgemm for f32 on CPUs without AVX-512.
// Three compute types:
//   kF32  - f32 weights and activations (the exact path the golden tests use);
//   kBF16 - bf16 weights and activations, f32 accumulation and output (vdpbf16ps; the fast path). On CPUs
//           without a bf16 matmul the weights stay bf16 and the products run in f32 on them: half the
//           memory and bandwidth of f32, with f32 activations;
//   kF16  - f16 weights held as their rows (in place from a mapped file), f32 activations and products: few
//           rows on gemm_small_m (F16C widening in the load), many rows on f32 panels widened per product
//           (oneDNN, or OpenBLAS's sgemm without AVX-512). What an F16 file holds, nothing rounded.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/dtype.h"
#include "core/compute_type.h"

namespace dllm {

// bf16 matmuls need AVX512_BF16 (or AMX) in oneDNN; elsewhere kBF16 means bf16 weights with f32 products.
bool bf16_matmul_supported();

// Who runs matmuls without bf16 hardware: oneDNN where it has AVX-512 kernels, otherwise OpenBLAS's sgemm (plus
// our small-row kernel, gemm_small_m.h). DLLM_MATMUL=onednn|openblas overrides the choice (for A/B timing).
enum class MatmulBackend { kOneDnn, kOpenBlas };
MatmulBackend f32_matmul_backend();
const char* matmul_backend_name(MatmulBackend b);

class Linear {
 public:
  Linear();
  // weight: [out_features, in_features] of dtype `stored` (F32/F16/BF16), read once here, not kept.
  Linear(const void* weight, DType stored, int64_t out_features, int64_t in_features, ComputeType compute);
  // The same product on a weight that stays where it lies (a mapped file; `owner` keeps it alive): nothing is
  // copied or reordered at load, so a replica starts in the time it takes to map the file. Where the stored
  // type is not the compute type, the weight is converted as by the constructor above.
  static Linear in_place(const void* weight, DType stored, int64_t out_features, int64_t in_features,
                         ComputeType compute, std::shared_ptr<const void> owner);
  ~Linear();
  Linear(Linear&&) noexcept;
  Linear& operator=(Linear&&) noexcept;

  // y = x·Wᵀ, or y += x·Wᵀ when accumulate (the residual add fused into the matmul).
  void forward(const float* x, int64_t rows, float* y, bool accumulate = false) const;

  int64_t out_features() const { return out_; }
  int64_t in_features() const { return in_; }
  ComputeType compute() const { return compute_; }
  size_t weight_bytes() const;
  DType weight_storage() const;  // how the weight is held: f32, or 16-bit for the bf16 compute type
  bool weight_in_place() const;  // multiplied where it lies (in_place), not from a copy
  // An in-place weight that oneDNN multiplies faster from its blocked layout (AVX-512: 1.2-1.6x at 64-256
  // rows, where the plain layout is copied into blocks inside every product) is reordered into it, and
  // forwards that start afterwards use it; the results are the same bits. Safe while other threads run
  // forward(): the reorder runs outside the lock and the swap inside it. Returns the bytes reordered (0:
  // nothing to do).
  size_t prepare() const;
  bool preparable() const;  // in place, on oneDNN, not yet prepared
  // The weight as [out, in] row-major values of the type it is held in (F32, BF16 or F16) into `out`, from
  // whichever layout it is in now: a device backend's copy, made once.
  DType export_rows(std::vector<uint8_t>& out) const;
  // Products of up to kGemvBf16MaxRows rows run on gemv_bf16_blocked (bf16 weights in oneDNN's BA16a64b2a
  // layout on an AVX512_BF16 CPU) instead of oneDNN's matmul, or (f16 weights) on gemm_small_m.
  bool few_rows_on_gemv() const;
  // forward's work for thread `thread` of `threads` of a region the caller runs, for few_rows_on_gemv()
  // weights and <= kGemvBf16MaxRows rows: its share of the output columns, the activations converted to bf16
  // by each thread itself. The same bits as forward.
  void forward_share(const float* x, int64_t rows, float* y, bool accumulate, int thread, int threads) const;

 private:
  void forward_plain(const float* x, int64_t rows, const void* w, float* y, bool accumulate) const;
  void forward_panels_onednn(const float* x, int64_t rows, const void* w, float* y, bool accumulate) const;
  void forward_f16_blocked_panels(const float* x, int64_t rows, const uint16_t* blocked, float* y,
                                  bool accumulate) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t out_ = 0, in_ = 0;
  ComputeType compute_ = ComputeType::kF32;
};

}  // namespace dllm
