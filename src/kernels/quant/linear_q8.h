// y[M, N] (+)= x[M, K] · Wᵀ with W kept in 8 bits: Q8_0 weights (int8 per element, one scale per 32) and the
// activations quantised on the fly to Q8_0 per row (llama.cpp's q8_0 x q8_0 scheme). AVX2 kernel (no VNNI here):
// |w| · sign(x, w) with vpmaddubsw + vpmaddwd per block of 32, scaled by d_w * d_x in f32; a micro-kernel of 4
// activation rows x 2 weight rows reuses every loaded block from registers. Memory: 1.125 bytes per weight instead
// of 4 (f32) or 2 (bf16). The transformer runs it through MatMul (src/kernels/matmul.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dllm::quant {

class LinearQ8 {
 public:
  LinearQ8() = default;
  // From Q8_0 blocks ([out][in / 32] blocks of 34 bytes, as in a GGUF file) or from f32 weights (quantised here,
  // with ggml's quantize_row_q8_0). in_features must be a multiple of 32.
  static LinearQ8 from_q8_0(const void* blocks, int64_t out_features, int64_t in_features);
  static LinearQ8 from_f32(const float* w, int64_t out_features, int64_t in_features);

  // y = x·Wᵀ, or y += x·Wᵀ when accumulate. Parallel (OpenMP) over blocks of weight rows.
  void forward(const float* x, int64_t rows, float* y, bool accumulate = false) const;
  // The same arithmetic in plain scalar code, operation for operation (the AVX2 lane order of the partial sums
  // included), so that forward() agrees with it bit for bit: the tests' reference.
  void forward_reference(const float* x, int64_t rows, float* y, bool accumulate = false) const;

  // Row `row` of W as f32 (d * q): the embedding lookup of a tied, 8-bit token_embd.
  void dequantize_row(int64_t row, float* out) const;

  int64_t out_features() const { return out_; }
  int64_t in_features() const { return in_; }
  size_t weight_bytes() const { return qs_.size() + d_.size() * sizeof(float); }

 private:
  int64_t out_ = 0, in_ = 0, nb_ = 0;
  std::vector<int8_t> qs_;  // [out][in]
  std::vector<float> d_;    // [out][in / 32]
};

// Activations to Q8_0 per block of 32 (ggml's quantize_row_q8_0, scale kept in f32): qs [rows][k],
// d [rows][k / 32]. Scalar reference; forward() uses an AVX2 version that gives the same bits.
void quantize_activations_q8(const float* x, int64_t rows, int64_t k, int8_t* qs, float* d);
// One row of it, AVX2 (the same bits as quantize_activations_q8): what forward() runs, shared with LinearGgml.
void quantize_row_q8_avx2(const float* x, int64_t k, int8_t* qs, float* d);

}  // namespace dllm::quant
