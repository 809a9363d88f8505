// Weights taken from a GGUF file by name, checked against the shapes the metadata implies, and held as the
// loader's WeightFormat / ExpertPacking / WeightLayout / backend say (gguf_loader.cpp's comment at the top
// lists the choices). Shared by the GGUF loaders of the shared Transformer and of DiffusionGemma.
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/huge_pages.h"
#include "io/gguf.h"
#include "kernels/quant/linear_ggml.h"
#include "kernels/quant/linear_packed.h"
#include "kernels/quant/quant.h"
#include "model/family.h"
#include "model/precision.h"

namespace dllm {

inline std::optional<DType> plain_dtype(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return DType::kF32;
    case GgmlType::kF16:
      return DType::kF16;
    case GgmlType::kBF16:
      return DType::kBF16;
    default:
      return std::nullopt;
  }
}

// Takes tensors by name, checks their shape (given in PyTorch order) and remembers which were used.
class TensorTaker {
 public:
  TensorTaker(std::shared_ptr<GgufFile> file, WeightFormat weights, ExpertPacking experts,
              WeightLayout layout, BackendKind backend)
      : file_(std::move(file)),
        weights_(weights),
        layout_(layout),
        pack_experts_(experts == ExpertPacking::kAtLoad),
        device_(backend != BackendKind::kCpu) {}

  const GgufTensor& take(const std::string& name, std::vector<int64_t> shape) {
    const GgufTensor* t = file_->find_tensor(name);
    std::vector<int64_t> ne(shape.rbegin(), shape.rend());
    std::string want = "[";
    for (size_t i = 0; i < ne.size(); ++i) want += (i ? ", " : "") + std::to_string(ne[i]);
    want += "]";
    if (!t) fail(file_->path(), ": missing tensor '", name, "' (the metadata implies ggml shape ", want, ")");
    if (t->dims != ne)
      fail(file_->path(), ": tensor '", name, "' has ggml shape ", t->dims_string(),
           " but the metadata implies ", want);
    used_.insert(name);
    return *t;
  }
  bool has(const std::string& name) const { return file_->find_tensor(name) != nullptr; }

  // The whole tensor as f32 (dequantised when quantized), rows put back in HF order when rope_heads > 0.
  std::vector<float> f32(const GgufTensor& t, int64_t rope_heads = 0) const {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    quant::dequantize(t.type, t.data, out.data(), t.numel());
    if (rope_heads == 0) return out;
    const int64_t rows = t.dims.size() == 2 ? t.dims[1] : 1, in = t.dims[0];
    const auto bytes =
        unpermute(reinterpret_cast<const uint8_t*>(out.data()), in * sizeof(float), rows, rope_heads, t.name);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }

  std::vector<float> vector(const std::string& name, const std::vector<int64_t>& shape) {
    return f32(take(name, shape));
  }

  // Whether a matrix with `in` columns is held in 8 bits (rows must be whole Q8_0 blocks).
  bool want_q8(GgmlType type, int64_t in) const {
    if (in % quant::kQK8_0 != 0) return false;
    return weights_ == WeightFormat::kQ8 || (weights_ == WeightFormat::kAuto && !plain_dtype(type));
  }

  // The tensor as 8-bit weights: Q8_0 blocks as stored (whole rows moved when un-permuting), else through
  // f32.
  quant::LinearQ8 q8(const GgufTensor& t, int64_t out, int64_t in, int64_t rope_heads = 0) const {
    if (t.type == GgmlType::kQ8_0) {
      if (rope_heads == 0) return quant::LinearQ8::from_q8_0(t.data, out, in);
      const auto rows = unpermute(t.data, ggml_row_bytes(t.type, in), out, rope_heads, t.name);
      return quant::LinearQ8::from_q8_0(rows.data(), out, in);
    }
    const std::vector<float> w = f32(t, rope_heads);
    return quant::LinearQ8::from_f32(w.data(), out, in);
  }

  // A weight matrix by name, rope rows moved back to HF order for `rope_heads` heads.
  MatMul linear(const std::string& name, int64_t out, int64_t in, ComputeType ct, int64_t rope_heads = 0) {
    const GgufTensor& t = take(name, {out, in});
    MatMul m = linear_of(t, name, out, in, ct, rope_heads);
    tally(t, m);
    return m;
  }

  MatMul linear_of(const GgufTensor& t, const std::string& name, int64_t out, int64_t in, ComputeType ct,
                   int64_t rope_heads) {
    if (rope_heads == 0) return rows(t, 0, out, in, ct);
    if (!plain_dtype(t.type)) {
      // Blocks never straddle rows: whole rows move back to HF order, then the matrix is held as any other.
      auto moved = std::make_shared<std::vector<uint8_t>>(
          unpermute(t.data, ggml_row_bytes(t.type, in), out, rope_heads, t.name));
      return blocks(t.type, moved->data(), out, in, ct, true, false, moved);
    }
    if (want_q8(t.type, in)) return q8(t, out, in, rope_heads);
    const DType dt = *plain_dtype(t.type);
    if (layout_ != WeightLayout::kBlockedAtLoad) {
      // Rows moved back to HF order straight from the mapping into one buffer, then held as they are.
      const size_t row_bytes = static_cast<size_t>(in) * dtype_size(dt);
      auto moved = huge_page_buffer(row_bytes * static_cast<size_t>(out));
      permute_rope_rows_into(t.data, row_bytes, out, rope_heads, /*to_gguf=*/false,
                             file_->path() + ": tensor '" + name + "'", static_cast<uint8_t*>(moved.get()));
      return Linear::in_place(moved.get(), dt, out, in, ct, moved);
    }
    const std::vector<float> w = f32(t, rope_heads);
    return Linear(w.data(), DType::kF32, out, in, ct);
  }

  // Rows [first, first + count) of a tensor seen as rows of `in` values: q, k or v of a fused attn_qkv, one
  // expert of a stacked ffn_*_exps ([experts, rows, in]). A row is whole blocks, so the slice starts at a
  // pointer offset. allow_q8 = false keeps the matrix plain (the router).
  MatMul rows(const GgufTensor& t, int64_t first, int64_t count, int64_t in, ComputeType ct,
              bool allow_q8 = true, bool expert = false) {
    const uint8_t* data = t.data + static_cast<size_t>(first) * ggml_row_bytes(t.type, in);
    MatMul m = blocks(t.type, data, count, in, ct, allow_q8, expert, nullptr);
    tally(t, m);
    return m;
  }

  void tally(const GgufTensor& t, const MatMul& m) {
    tally_.add(std::string(ggml_type_info(static_cast<uint32_t>(t.type))->name), m);
  }
  std::map<std::string, std::string> precision_by_type() const { return tally_.result(); }

  // `count` rows of `type` at `data`: in the mapped file, or in `moved` (rows re-ordered here).
  //  * Q8_0 / Q4_0 / Q4_K, not an expert (unless pack_experts), whole panels (kAuto): repacked into 16-row
  //  panels
  //    (quant::LinearPacked, int8 products 16 columns at a time) and the mapped pages released: the file's
  //    bytes, once.
  //  * Q4_0, Q4_K and Q6_K otherwise, and Q8_0 experts: multiplied in place from the blocks
  //  (quant::LinearGgml;
  //    4.5 / 6.6 bits a weight; a 16B-parameter MoE is not copied beside its mapping).
  //  * with kQ8 (or a quantized type no kernel runs in place): 8 bits in quant::LinearQ8; plain types as
  //    Linear (in place when aligned), dequantised with kDequantize.
  MatMul blocks(GgmlType type, const uint8_t* data, int64_t count, int64_t in, ComputeType ct, bool allow_q8,
                bool expert, std::shared_ptr<std::vector<uint8_t>> moved) const {
    const bool k_quant = type == GgmlType::kQ4_K || type == GgmlType::kQ6_K;
    // A device backend copies Q8_0 and Q4_K blocks as they are stored (and dequantises in its shaders): the
    // mapped blocks stay a view, never repacked for the CPU's kernels.
    if (device_ && allow_q8 && weights_ == WeightFormat::kAuto &&
        ((type == GgmlType::kQ8_0 && in % 32 == 0) || (type == GgmlType::kQ4_K && in % 256 == 0))) {
      std::shared_ptr<const void> owner = file_;
      if (moved) owner = moved;
      return quant::LinearGgml::view(type, data, count, in, owner);
    }
    if (allow_q8 && weights_ == WeightFormat::kAuto) {
      if ((!expert || pack_experts_) && quant::LinearPacked::can_pack(type, count, in)) {
        auto packed = quant::LinearPacked::pack(type, data, count, in);
        if (!moved) file_->release(data, ggml_row_bytes(type, in) * static_cast<size_t>(count));
        return packed;
      }
      if ((k_quant && in % 256 == 0) || (type == GgmlType::kQ4_0 && in % 32 == 0) ||
          (type == GgmlType::kQ8_0 && in % 32 == 0 && (expert || moved))) {
        std::shared_ptr<const void> owner = file_;
        if (moved) owner = moved;
        return quant::LinearGgml::view(type, data, count, in, owner);
      }
    }
    const auto dt = plain_dtype(type);
    const bool q8 = allow_q8 && want_q8(type, in);
    if (q8 && type == GgmlType::kQ8_0) return quant::LinearQ8::from_q8_0(data, count, in);
    if (!q8 && dt && !moved && reinterpret_cast<uintptr_t>(data) % dtype_size(*dt) == 0)
      return layout_ == WeightLayout::kBlockedAtLoad ? Linear(data, *dt, count, in, ct)
                                                     : Linear::in_place(data, *dt, count, in, ct, file_);
    std::vector<float> w(static_cast<size_t>(count * in));
    quant::dequantize(type, data, w.data(), count * in);
    if (q8) return quant::LinearQ8::from_f32(w.data(), count, in);
    return Linear(w.data(), DType::kF32, count, in, ct);
  }

  void check_all_used() const {
    for (const auto& t : file_->tensors())
      if (!used_.count(t.name))
        fail(file_->path(), ": unexpected tensor '", t.name, "' (not part of the ", arch_, " architecture)");
  }
  void set_arch(const std::string& a) { arch_ = a; }

  std::vector<uint8_t> unpermute(const uint8_t* w, size_t row_bytes, int64_t rows, int64_t heads,
                                 const std::string& name) const {
    return permute_rope_rows(w, row_bytes, rows, heads, /*to_gguf=*/false,
                             file_->path() + ": tensor '" + name + "'");
  }

 private:
  std::shared_ptr<GgufFile> file_;
  WeightFormat weights_;
  WeightLayout layout_;
  bool pack_experts_ = false;
  bool device_ = false;  // the weights go to a device backend
  std::set<std::string> used_;
  std::string arch_;
  PrecisionTally tally_;
};

}  // namespace dllm
