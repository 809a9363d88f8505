// y[M, N] (+)= x[M, K] · Wᵀ for Q8_0, Q4_0 and Q4_K weights repacked once, at load, into panels of 16 weight
// rows: the layout that lets an int8 multiply-add work on 16 output columns at once, with no horizontal sums
// and one float conversion per block and 16 columns (the in-place LinearGgml tiles spend a conversion, a
// scale product and an FMA per block, row and column, which is as many instructions as f32 GEMM has for the
// same products; that is why in place Q8_0 runs no faster than f32 sgemm at 256 rows).
//
// Per panel p (weight rows 16p .. 16p+15) and block b (elements 32b .. 32b+31) the panel stores
//   scales: 16 f16, the rows' block scales (as the file has them);
//   quants, Q8_0: 8 groups of 4 elements x 16 rows x 4 bytes: byte (g * 16 + r) * 4 + i is element 4g + i of
//     row r. For the VNNI kernels (AVX512_VNNI, AVX-VNNI) the bytes are w + 128 (unsigned; vpdpbusd
//     multiplies unsigned by signed bytes and the activations stay signed), for AVX2 w itself (vpmaddubsw
//     would saturate on w + 128);
//   quants, Q4_0: 4 groups x 16 rows x 4 bytes, the file's own bytes re-ordered: byte (g * 16 + r) * 4 + i is
//     the file's qs[4g + i] of row r, whose low nibble is element 4g + i and high nibble element 16 + 4g + i.
//   Q4_K, per super-block of 256: quants as 4 pairs of sub-blocks x 8 groups x 16 rows x 4 bytes, byte
//     (jp * 128 + g * 16 + r) * 4 + i being the file's qs[32 jp + 4g + i] of row r (low nibble: element 4g +
//     i of sub-block 2jp, high nibble: of sub-block 2jp + 1); metadata: d and dmin (16 f16 each) and the
//     6-bit scales and mins unpacked to bytes, [sub-block][row] (320 bytes per panel and super-block where
//     the file has 256: 2.8% more). Activations Q8_K (256-blocks, sums of each 32); per output and
//     super-block acc = fma(float(sum_j sc_j * dot_j), d * d_x, acc), then fma(-float(sum_j m_j * xsum_j),
//     dmin * d_x, acc).
// A broadcast of 4 activation bytes against one 64-byte group multiplies 16 rows x 4 elements. The offsets
// (128 for biased Q8_0, 8 for Q4_0) multiply the block's sum of activation int8s, computed once per
// activation row and block: the dot starts from -offset * sum(x) instead of 0.
// The activations are quantised per row to Q8_0 (32 int8 and an f32 scale per block, as LinearQ8 /
// LinearGgml do). Per output, per block in order: acc = fma(float(exact int32 dot), d_w * d_x, acc); then y =
// acc or y + acc. forward_reference does exactly that in scalar code, and both kernels agree with it bit for
// bit, for any thread count.
//
// Memory: the panels are the file's bytes re-ordered (1.0625 bytes a weight for Q8_0, 0.5625 for Q4_0, 0.578
// for Q4_K; no requantisation); the loader releases the mapped pages it packed from, so a loaded model stays
// about its file's size. Needs rows % 16 == 0 and whole blocks per row (can_pack); other shapes stay in
// LinearGgml.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/ggml_types.h"
#include "kernels/quant/linear_ggml.h"

namespace dllm::quant {

class LinearPacked {
 public:
  // The same kernel sets, cpuid check and DLLM_GGML_KERNEL override as the in-place kernels.
  using Kernel = LinearGgml::Kernel;
  static constexpr int kPanelRows = 16;

  LinearPacked() = default;
  static bool can_pack(GgmlType type, int64_t rows, int64_t cols);
  // From `rows` rows of GGUF blocks of `type` (Q8_0, Q4_0 or Q4_K), any alignment; copied into panels.
  // `kernel` picks the byte layout (kAuto: the fastest kernel this CPU runs).
  static LinearPacked pack(GgmlType type, const void* blocks, int64_t rows, int64_t cols,
                           Kernel kernel = Kernel::kAuto);
  // f32 weights [rows][cols] quantised to `type` with quant::quantize (ggml's reference), then packed.
  static LinearPacked quantize_f32(GgmlType type, const float* w, int64_t rows, int64_t cols,
                                   Kernel kernel = Kernel::kAuto);

  void forward(const float* x, int64_t rows, float* y, bool accumulate = false) const;
  // Several matrices of one input (a layer's q, k and v; gate and up) in one parallel region: the activations
  // quantised once, one fork and join, and the work split evenly over all of them (token generation's small
  // matrices alone leave a thread idle at their ends). Each y as forward() gives it, bit for bit. They must
  // be of one block type, kernel and width (can_group).
  struct Output {
    const LinearPacked* weights;
    float* y;
  };
  static void forward_group(std::span<const Output> outputs, const float* x, int64_t rows,
                            bool accumulate = false);
  // forward_group's work for thread `thread` of `threads`, called by each thread of a parallel region the
  // caller runs (and synchronises after): its contiguous share of the outputs' panels, the activation rows
  // quantised by each thread itself. For few rows (<= kShareRows: the weights stream from memory); the same
  // bits as forward_group.
  static constexpr int64_t kShareRows = 4;
  static void forward_group_share(std::span<const Output> outputs, const float* x, int64_t rows,
                                  bool accumulate, int thread, int threads);
  static bool can_group(const LinearPacked& a, const LinearPacked& b);
  // Scalar, single-threaded, allocates: forward() equals it bit for bit.
  void forward_reference(const float* x, int64_t rows, float* y, bool accumulate = false) const;
  // Row `row` of W as f32, equal to quant::dequantize of the original blocks (an embedding lookup).
  void dequantize_row(int64_t row, float* out) const;

  GgmlType type() const { return type_; }
  Kernel kernel() const { return kernel_; }
  int64_t out_features() const { return rows_; }
  int64_t in_features() const { return cols_; }
  size_t weight_bytes() const;

  static bool supported(Kernel kernel) { return LinearGgml::supported(kernel); }
  static Kernel best_kernel() { return LinearGgml::selected_set(); }  // what kAuto packs for here
  static const char* kernel_name(Kernel kernel) { return LinearGgml::kernel_name(kernel); }
  static const char* kernel_requirement(Kernel kernel) { return LinearGgml::kernel_requirement(kernel); }

 private:
  // forward_group (share_threads 0) or forward_group_share.
  static void run_group(std::span<const Output> outputs, const float* x, int64_t rows, bool accumulate,
                        int share_thread, int share_threads);
  size_t quant_bytes_per_block() const;
  size_t meta_bytes_per_block() const;
  int64_t block_elements() const;  // 32, or 256 for Q4_K
  void block_ints(int64_t row, int64_t b, int32_t* out) const;

  GgmlType type_ = GgmlType::kQ8_0;
  Kernel kernel_ = Kernel::kAvx2;
  int64_t rows_ = 0, cols_ = 0, blocks_ = 0;  // blocks_ per row
  std::shared_ptr<uint8_t> quants_;           // [panel][block][quant_bytes_per_block], 64-byte aligned
  std::shared_ptr<uint8_t> meta_;             // [panel][block][meta_bytes_per_block]: scales (and mins)
};

}  // namespace dllm::quant
