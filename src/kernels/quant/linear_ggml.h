// y[M, N] (+)= x[M, K] · Wᵀ straight from GGUF blocks, in place: W is N rows of Q8_0, Q4_0, Q4_K or Q6_K
// blocks exactly as a GGUF file stores them (a view of the mapped file, not copied, not requantised; Q4_K
// stays 4.5 bits a weight). The activations are quantised on the fly per row, as llama.cpp does:
//   Q8_0 / Q4_0 weights x Q8_0 activations: 32-element blocks, int8 with an f32 scale per block (ggml rounds
//   it to f16). Q4_K / Q6_K weights x Q8_K activations: 256-element blocks, int8 with an f32 scale (ggml's
//   quantize_row_q8_K: the signed extreme maps to -127) and the sums of each 32 int8s (ggml keeps them per 16
//   in block_q8_K's bsums; the kernel only ever needs pairs of them, so they are kept added). The Q4_K mins
//   term is dmin * sum_j m_j * (sum of sub-block j's int8s): one 8-lane madd per super-block instead of 256
//   products. Q4_0's and Q6_K's offsets (-8, -32) are vpmaddubsw(offset, x), formed once per activation row.
// Integer dot products: AVX2 (vpmaddubsw + vpmaddwd, as ggml's AVX2 paths), and where cpuid reports
// AVX512_VNNI (+VL, BW) or AVX-VNNI the same tiles with the multiply-adds fused: vpdpbusd for Q8_0 / Q4_0,
// vpmaddubsw + vpdpwssd for Q4_K / Q6_K (the scales multiply int16 pair sums; vpdpbusd would need a 32-bit
// multiply per sub-block after it). Kernel sets, best first: AMX_INT8, AVX512_VNNI, AVX_VNNI, AVX2;
// DLLM_GGML_KERNEL=avx2|avx_vnni|avx512_vnni|amx forces one. AMX_INT8 has tiles only in LinearPacked (16
// activation rows at a time); the in-place kernels run AVX512_VNNI under it.
// All give the same integers, so the same bits, and all agree bit for bit with
// forward_reference (scalar, same order of float operations). A tile of up to 4 activation rows runs against
// 1-4 weight rows, so a weight block loaded once serves every row of the tile; rows of W are handed out to
// OpenMP threads in dynamic chunks. Per call: the quantised activations go to a thread-local scratch that
// only ever grows (no allocation once warm).
//
// From a GGUF tensor (io/gguf.h GgufTensor t, ggml dims ne[0] = K = in_features, ne[1] = N = out_features):
//   auto w = quant::LinearGgml::view(GgmlType(t.type), t.data, /*rows=*/t.ne[1], /*cols=*/t.ne[0], mapping);
// where `mapping` (optional) is a shared_ptr that keeps the mapped file alive for as long as the view lives;
// without it the caller keeps the file mapped. Expert e of a 3-D expert tensor [n_expert][N][K]
// (ne = {K, N, E}):
//   view(type, static_cast<const uint8_t*>(t.data) + e * N * ggml_row_bytes(type, K), N, K, mapping).
// Types: kQ8_0 and kQ4_0 (K a multiple of 32), kQ4_K and kQ6_K (K a multiple of 256); anything else fails
// with a message (the loader requantises other types or keeps them as f32). Random models:
// LinearGgml::quantize_f32(type, w, N, K) owns its blocks (quant::quantize, ggml's reference quantisers). Run
// through MatMul (kernels/matmul.h) like the others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/ggml_types.h"

namespace dllm::quant {

class LinearGgml {
 public:
  enum class Kernel { kAuto, kAvx2, kAvxVnni, kAvx512Vnni, kAmx };

  LinearGgml() = default;
  // A view of rows x cols weights in GGUF blocks at `data` (any alignment); nothing is copied. `owner` (may
  // be null) is held for the view's lifetime: pass the mapping's owner so the blocks cannot be unmapped under
  // it.
  static LinearGgml view(GgmlType type, const void* data, int64_t rows, int64_t cols,
                         std::shared_ptr<const void> owner = {});
  // f32 weights [rows][cols] quantised to `type` with quant::quantize, into a buffer this object owns.
  static LinearGgml quantize_f32(GgmlType type, const float* w, int64_t rows, int64_t cols);

  // y = x·Wᵀ, or y += x·Wᵀ when accumulate; x is [rows][in_features], y [rows][out_features]. The fastest
  // kernel this CPU runs (kernel(Kernel::kAuto)); the same bits for any thread count.
  void forward(const float* x, int64_t rows, float* y, bool accumulate = false) const;
  // One kernel in particular (tests, benchmarks); fails when !supported(kernel).
  void forward(Kernel kernel, const float* x, int64_t rows, float* y, bool accumulate = false) const;
  // ya = x·Aᵀ and yb = x·Bᵀ with x quantised once (an expert's gate and up projections); two forwards when
  // the matrices differ in type or in_features.
  static void forward_shared_input(const LinearGgml& a, float* ya, const LinearGgml& b, float* yb,
                                   const float* x, int64_t rows);
  // The same integer arithmetic in scalar code, float operations in the kernels' order: forward() equals it
  // bit for bit. Single-threaded, allocates: the tests' reference.
  void forward_reference(const float* x, int64_t rows, float* y, bool accumulate = false) const;

  // Row `row` of W as f32 (quant::dequantize of its blocks): an embedding lookup.
  void dequantize_row(int64_t row, float* out) const;

  GgmlType type() const { return type_; }
  const void* data() const { return data_; }  // the first block (the file's bytes for a view)
  bool owns_data() const { return owns_; }    // false for a view
  int64_t out_features() const { return rows_; }
  int64_t in_features() const { return cols_; }
  size_t row_bytes() const { return row_bytes_; }
  // The bytes of blocks a forward reads: rows * row_bytes (0.5625 a weight for Q4_K, 1.0625 for Q8_0).
  size_t weight_bytes() const { return static_cast<size_t>(rows_) * row_bytes_; }

  static bool supported(Kernel kernel);  // kAuto and kAvx2: always; the others: cpuid (AMX: and the OS)
  // The set DLLM_GGML_KERNEL names, or else the best this CPU runs (may be kAmx: LinearPacked's best).
  static Kernel selected_set();
  static Kernel best_kernel();  // what kAuto runs here in place: selected_set(), with AVX512_VNNI for AMX
  static const char* kernel_name(Kernel kernel);
  // The cpuid features `kernel` needs (for messages: why a set cannot run here).
  static const char* kernel_requirement(Kernel kernel);

 private:
  // count (1 or 2) matrices of one type and in_features against the same x, quantised once.
  static void forward_many(Kernel kernel, const LinearGgml* const* ws, float* const* ys, int count,
                           const float* x, int64_t rows, bool accumulate);

  GgmlType type_ = GgmlType::kQ8_0;
  const uint8_t* data_ = nullptr;
  int64_t rows_ = 0, cols_ = 0;
  size_t row_bytes_ = 0;
  bool owns_ = false;
  std::shared_ptr<const void> owned_;  // the blocks (quantize_f32) or the mapping's owner (view), or null
};

// Activation quantisers, scalar references (forward() runs AVX2 versions giving the same bits).
// Q8_K: per 256 elements of each row, qs [rows][k] int8, d [rows][k / 256] f32, sums [rows][k / 32] int16.
void quantize_activations_q8_k(const float* x, int64_t rows, int64_t k, int8_t* qs, float* d, int16_t* sums);
// One row of it, AVX2 (the same bits): what forward() runs, shared with LinearPacked.
void quantize_row_q8_k(const float* x, int64_t k, int8_t* qs, float* d, int16_t* sums);

}  // namespace dllm::quant
