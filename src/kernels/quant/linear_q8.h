// y[M, N] (+)= x[M, K] · Wᵀ with W kept in 8 bits: Q8_0 weights (int8 per element, one scale per 32) and the
// activations quantised on the fly to Q8_0 per row (llama.cpp's q8_0 x q8_0 scheme). AVX2 kernel: |w| · sign(x, w)
// with vpmaddubsw + vpmaddwd per block of 32, scaled by d_w * d_x in f32. Memory: 1.06 bytes per weight instead of
// 4 (f32) or 2 (bf16). Not wired into Transformer yet (see docs/gguf.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dllm::quant {

class LinearQ8 {
 public:
  LinearQ8() = default;
  // From Q8_0 blocks ([out][in / 32] blocks of 34 bytes, as in a GGUF file) or from f32 weights (quantised here).
  static LinearQ8 from_q8_0(const void* blocks, int64_t out_features, int64_t in_features);
  static LinearQ8 from_f32(const float* w, int64_t out_features, int64_t in_features);

  void forward(const float* x, int64_t rows, float* y, bool accumulate = false) const;
  // The same arithmetic in plain scalar code (the test's reference).
  void forward_reference(const float* x, int64_t rows, float* y) const;

  int64_t out_features() const { return out_; }
  int64_t in_features() const { return in_; }
  size_t weight_bytes() const { return qs_.size() + d_.size() * sizeof(float); }

 private:
  int64_t out_ = 0, in_ = 0, nb_ = 0;
  std::vector<int8_t> qs_;  // [out][in]
  std::vector<float> d_;    // [out][in / 32]
};

// Activations to Q8_0 per block of 32 (ggml's quantize_row_q8_0): qs [rows][k], d [rows][k / 32].
void quantize_activations_q8(const float* x, int64_t rows, int64_t k, int8_t* qs, float* d);

}  // namespace dllm::quant
