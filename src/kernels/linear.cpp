#include "kernels/linear.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/huge_pages.h"
#include "kernels/gemm_small_m.h"
#include "kernels/gemv_bf16.h"
#include "kernels/gemv_f16.h"
#include "kernels/onednn.h"
#include "kernels/parallel.h"
#include "kernels/profile.h"

namespace dllm {

using dnnl::memory;
using Tag = memory::format_tag;
using DT = memory::data_type;

namespace {

// The weight layout is chosen by oneDNN for this many rows; other row counts reuse it.
constexpr int64_t kPackingRows = 256;

DT compute_dt(ComputeType c) { return c == ComputeType::kBF16 ? DT::bf16 : DT::f32; }

// The weight layout oneDNN picks for a typical matmul of this shape (its blocked layout).
memory::desc blocked_weight_desc(int64_t in, int64_t out, ComputeType compute) {
  const DT dt = compute_dt(compute);
  memory::desc src_any({kPackingRows, in}, dt, Tag::ab);
  memory::desc wei_any({in, out}, dt, Tag::any);
  memory::desc dst_md({kPackingRows, out}, DT::f32, Tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_any, wei_any, dst_md), onednn_engine())
      .weights_desc();
}

// x's rows as bf16, each padded with zeros to k_padded: the activations gemv_bf16_blocked reads.
void rows_to_padded_bf16(const float* x, int64_t rows, int64_t in, int64_t k_padded,
                         std::vector<uint16_t>& out) {
  out.assign(static_cast<size_t>(rows * k_padded), 0);
  for (int64_t r = 0; r < rows; ++r)
    convert_f32_to_bf16(x + r * in, out.data() + r * k_padded, static_cast<size_t>(in));
}

// oneDNN memory for `md` on shared huge pages (a 128 x 896 k or v too), which `keep` then owns.
memory weight_memory(const memory::desc& md, std::shared_ptr<void>& keep) {
  keep = pooled_huge_page_buffer(md.get_size());
  return memory(md, onednn_engine(), keep.get());
}

// K as padded in `md` when it is the bf16 layout gemv_bf16_blocked reads on this CPU, else 0.
// DLLM_BF16_GEMV=0 leaves those rows to oneDNN (for A/B timing).
int64_t gemv_k_padded(const memory::desc& md, int64_t in, int64_t out) {
  static const bool enabled = [] {
    const char* env = std::getenv("DLLM_BF16_GEMV");
    if (!env || std::string(env) == "1") return true;
    if (std::string(env) == "0") return false;
    fail("DLLM_BF16_GEMV='", env, "' must be 0 (oneDNN for few rows) or 1 (the hand-written kernel)");
  }();
  if (!enabled || !gemv_bf16_blocked_supported()) return 0;
  if (md != memory::desc({in, out}, DT::bf16, Tag::BA16a64b2a)) return 0;
  return md.data.padded_dims[0];
}

}  // namespace

bool bf16_matmul_supported() {
  static const bool supported = [] {
    try {
      memory::desc src({kPackingRows, 64}, DT::bf16, Tag::ab), wei({64, 64}, DT::bf16, Tag::any);
      memory::desc dst({kPackingRows, 64}, DT::f32, Tag::ab);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), onednn_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return supported;
}

MatmulBackend f32_matmul_backend() {
  static const MatmulBackend backend = [] {
    if (const char* env = std::getenv("DLLM_MATMUL")) {
      const std::string v = env;
      if (v == "onednn") return MatmulBackend::kOneDnn;
      if (v == "openblas") return MatmulBackend::kOpenBlas;
      fail("DLLM_MATMUL='", v, "' is not a matmul backend (onednn | openblas)");
    }
    // oneDNN 2.6's f32 matmul on AVX2-only CPUs is its generic jit gemm, which measured 0.55-0.75x OpenBLAS's
    // sgemm here (docs/performance.md); with AVX-512 its brgemm kernels are the better choice.
    return __builtin_cpu_supports("avx512f") ? MatmulBackend::kOneDnn : MatmulBackend::kOpenBlas;
  }();
  return backend;
}

const char* matmul_backend_name(MatmulBackend b) { return b == MatmulBackend::kOneDnn ? "oneDNN" : "OpenBLAS"; }

// oneDNN f32 matmuls over widened panels of 16-bit weights, by (rows, panel columns).
using PanelPrimitives = std::map<std::pair<int64_t, int64_t>, dnnl::matmul>;

struct Linear::Impl {
  MatmulBackend backend = MatmulBackend::kOneDnn;  // who multiplies many rows
  // The weight held as its [N, K] rows (the OpenBLAS backend; f16 weights on either), not oneDNN's blocks.
  bool plain = false;
  // Plain: the [N, K] weight, row-major, stored as f32, bf16 or f16.
  DType storage = DType::kF32;
  std::vector<float> weight_f32;
  std::vector<uint16_t> weight_16;
  // In place (Linear::in_place): the stored [N, K] rows, kept alive by `owner`; nothing above is filled.
  const void* mapped = nullptr;
  std::shared_ptr<const void> owner;
  bool reorder_pending = false;      // in place on oneDNN: prepare() may move it into the blocked layout
  mutable std::vector<float> panel;  // 16-bit weights widened to f32, one panel of rows at a time
  // 16-bit weights on oneDNN: an f32 matmul per (rows, panel columns) over a widened panel (accumulation happens
  // in the copy into y), from plain rows (weights "ba") or from f16 column blocks (BA16a64b): one map each, as
  // both can serve one Linear.
  mutable PanelPrimitives panel_prims_plain, panel_prims_blocked;
  mutable std::vector<float> panel_out;  // a panel's product, dense, before it is copied into y
  // oneDNN backend: [K, N] in its blocked layout, and a primitive per (rows, accumulate).
  memory::desc weight_md;
  memory weight;
  std::shared_ptr<void> weight_buffer;  // what `weight` points into (huge pages)
  mutable std::mutex mutex;
  mutable std::mutex panel_mutex;  // the widened panel buffer and its primitives
  struct Prim {
    dnnl::matmul matmul;
    memory::desc src_md, dst_md;
  };
  mutable std::map<std::pair<int64_t, bool>, Prim> by_rows;
  mutable std::vector<uint16_t> bf16_scratch;
  // > 0: the weight is in the layout gemv_bf16_blocked reads, K padded to this; few-row products go there.
  int64_t gemv_k_padded = 0;
  // f16 weights in gemv_f16.h's column-blocked layout (AVX-512 CPUs, where oneDNN runs the f32 panels): set
  // once, at load or by prepare(), and never moved again.
  const uint16_t* f16_blocked = nullptr;
  std::shared_ptr<void> f16_blocked_buffer;

  const void* weight_rows() const {
    if (mapped) return mapped;
    return storage == DType::kF32 ? static_cast<const void*>(weight_f32.data()) : weight_16.data();
  }
};

namespace {

// Whether oneDNN multiplies this compute type from its own blocked weight layout. f16 weights never are:
// oneDNN 2.6 has no f16 matmul on CPUs (and a blocked f16 copy would need its own gemv), so they stay as
// their rows, multiplied by gemm_small_m (few rows) or as f32 panels widened per product (many rows).
bool blocked_on_onednn(ComputeType compute) {
  switch (compute) {
    case ComputeType::kBF16:
      return bf16_matmul_supported();
    case ComputeType::kF32:
      return f32_matmul_backend() == MatmulBackend::kOneDnn;
    case ComputeType::kF16:
      return false;
  }
  return false;
}

// f16 weights are held in gemv_f16.h's blocked layout where its kernel runs and oneDNN multiplies the widened
// panels; elsewhere (AVX2: gemm_small_m and OpenBLAS) as their rows.
bool f16_blocked_layout() {
  return gemv_f16_blocked_supported() && f32_matmul_backend() == MatmulBackend::kOneDnn;
}

// The blocked copy of [n, k] f16 rows, on shared huge pages that `keep` then owns.
const uint16_t* make_f16_blocked(const uint16_t* rows, int64_t n, int64_t k, std::shared_ptr<void>& keep) {
  keep = pooled_huge_page_buffer(static_cast<size_t>(f16_blocked_values(n, k)) * sizeof(uint16_t));
  auto* out = static_cast<uint16_t*>(keep.get());
  f16_rows_to_blocked(rows, n, k, out);
  return out;
}

// One panel's product on oneDNN: y[:, n0 .. n0 + cols) (+)= x · panelᵀ. oneDNN 2.6's brgemm matmul wants a dense
// destination (a strided one, y's columns in place, falls to its reference kernel: ~100x slower), so the
// product lands in a dense scratch and is copied (added) into y: rows x cols floats against rows x cols x K
// multiply-adds.
void panel_product(PanelPrimitives& prims, const memory& src,
                   const memory::desc& wei_md, float* panel, int64_t rows, int64_t cols, int64_t n_total,
                   std::vector<float>& scratch, float* y_cols, bool accumulate) {
  auto& eng = onednn_engine();
  memory::desc dst_md({rows, cols}, DT::f32, Tag::ab);
  const auto key = std::make_pair(rows, cols);
  auto it = prims.find(key);
  if (it == prims.end())
    it = prims.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src.get_desc(), wei_md,
                                                                                         dst_md),
                                                                       eng)))
             .first;
  scratch.resize(static_cast<size_t>(rows * cols));
  memory wei(wei_md, eng, panel);
  memory dst(dst_md, eng, scratch.data());
  it->second.execute(onednn_stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
  onednn_stream().wait();
  parallel_for_if(rows * cols >= (1 << 15), rows, [&](int64_t r) {
    const float* from = scratch.data() + r * cols;
    float* to = y_cols + r * n_total;
    if (accumulate)
      for (int64_t c = 0; c < cols; ++c) to[c] += from[c];
    else
      std::memcpy(to, from, static_cast<size_t>(cols) * sizeof(float));
  });
}

}  // namespace

Linear::Linear(const void* weight, DType stored, int64_t out_features, int64_t in_features, ComputeType compute)
    : impl_(std::make_unique<Impl>()), out_(out_features), in_(in_features), compute_(compute) {
  const size_t count = static_cast<size_t>(out_ * in_);
  if (!blocked_on_onednn(compute_)) {
    impl_->plain = true;
    impl_->backend = f32_matmul_backend();
    if (compute_ == ComputeType::kF16) {  // f16 rows, rounded to nearest even from f32 / bf16
      impl_->storage = DType::kF16;
      impl_->weight_16.resize(count);
      if (stored == DType::kF16) {
        std::memcpy(impl_->weight_16.data(), weight, count * sizeof(uint16_t));
      } else {
        std::vector<float> wide(count);
        convert_to_f32(stored, weight, wide.data(), count);
        for (size_t i = 0; i < count; ++i) impl_->weight_16[i] = f32_to_f16(wide[i]);
      }
      if (f16_blocked_layout()) {  // the rows only pass through
        impl_->f16_blocked = make_f16_blocked(impl_->weight_16.data(), out_, in_, impl_->f16_blocked_buffer);
        std::vector<uint16_t>().swap(impl_->weight_16);
      }
    } else if (compute_ == ComputeType::kF32) {
      impl_->storage = DType::kF32;
      impl_->weight_f32.resize(count);
      convert_to_f32(stored, weight, impl_->weight_f32.data(), count);
    } else if (stored == DType::kF32) {
      impl_->storage = DType::kBF16;
      impl_->weight_16.resize(count);
      convert_f32_to_bf16(static_cast<const float*>(weight), impl_->weight_16.data(), count);
    } else if (stored == DType::kBF16) {  // bf16 stays as it is
      impl_->storage = stored;
      impl_->weight_16.resize(count);
      std::memcpy(impl_->weight_16.data(), weight, count * sizeof(uint16_t));
    } else {  // f16 rounded to bf16, as on the oneDNN path
      impl_->storage = DType::kBF16;
      impl_->weight_16.resize(count);
      const auto* f16 = static_cast<const uint16_t*>(weight);
      for (size_t i = 0; i < count; ++i) impl_->weight_16[i] = f32_to_bf16(f16_to_f32(f16[i]));
    }
    return;
  }
  auto& eng = onednn_engine();
  // Let oneDNN pick the weight layout for a typical matmul, then reorder the weight into it once.
  impl_->weight_md = blocked_weight_desc(in_, out_, compute_);
  impl_->weight = weight_memory(impl_->weight_md, impl_->weight_buffer);
  impl_->gemv_k_padded = gemv_k_padded(impl_->weight_md, in_, out_);

  // The stored [N, K] row-major weight is [K, N] with layout "ba". oneDNN does not read f16 here: it is
  // widened to f32 first, or for bf16 products rounded straight to bf16 (widening is exact, then round to
  // nearest even as oneDNN's reorder does: the same bits from half the bytes; a 0.5B F16 file loaded in 6.7 s
  // through f32).
  std::vector<float> staged;
  std::vector<uint16_t> staged_bf16;
  DT stored_dt = DT::f32;
  const void* src_ptr = weight;
  if (stored == DType::kF16 && compute_ == ComputeType::kBF16) {
    staged_bf16.resize(count);
    const auto* f16 = static_cast<const uint16_t*>(weight);
    uint16_t* bf16 = staged_bf16.data();
#pragma omp parallel for schedule(static) if (count >= (size_t{1} << 20))
    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) bf16[i] = f32_to_bf16(f16_to_f32(f16[i]));
    src_ptr = bf16;
    stored_dt = DT::bf16;
  } else if (stored == DType::kF16) {
    staged.resize(count);
    convert_to_f32(stored, weight, staged.data(), staged.size());
    src_ptr = staged.data();
  } else {
    stored_dt = stored == DType::kBF16 ? DT::bf16 : DT::f32;
  }
  memory user({{in_, out_}, stored_dt, Tag::ba}, eng, const_cast<void*>(src_ptr));
  dnnl::reorder(user, impl_->weight).execute(onednn_stream(), user, impl_->weight);
  onednn_stream().wait();
}

Linear Linear::in_place(const void* weight, DType stored, int64_t out_features, int64_t in_features,
                        ComputeType compute, std::shared_ptr<const void> owner) {
  const bool onednn = blocked_on_onednn(compute);
  // Each compute type multiplies its own storage type's rows where they lie.
  const bool same_type = compute == ComputeType::kF32    ? stored == DType::kF32
                         : compute == ComputeType::kBF16 ? stored == DType::kBF16
                                                         : stored == DType::kF16;
  const bool aligned = reinterpret_cast<uintptr_t>(weight) % dtype_size(stored) == 0;
  if (!same_type || !aligned) return Linear(weight, stored, out_features, in_features, compute);
  Linear l;
  l.impl_ = std::make_unique<Impl>();
  l.out_ = out_features;
  l.in_ = in_features;
  l.compute_ = compute;
  Impl& im = *l.impl_;
  im.mapped = weight;
  im.owner = std::move(owner);
  im.storage = stored;
  if (!onednn) {
    im.plain = true;
    im.backend = f32_matmul_backend();
    im.reorder_pending = compute == ComputeType::kF16 && f16_blocked_layout();
    return l;
  }
  // The stored [N, K] row-major weight is oneDNN's [K, N] in layout "ba": its matmul reads it as it is.
  im.backend = MatmulBackend::kOneDnn;
  im.reorder_pending = true;
  im.weight_md = memory::desc({in_features, out_features}, compute_dt(compute), Tag::ba);
  im.weight = memory(im.weight_md, onednn_engine(), const_cast<void*>(weight));
  return l;
}

Linear::Linear() = default;
Linear::~Linear() = default;
Linear::Linear(Linear&&) noexcept = default;
Linear& Linear::operator=(Linear&&) noexcept = default;

DType Linear::export_rows(std::vector<uint8_t>& out) const {
  if (!impl_) fail("Linear: export_rows on an empty weight");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Impl& im = *impl_;
  const auto count = static_cast<size_t>(out_ * in_);
  if (im.f16_blocked) {
    out.resize(count * sizeof(uint16_t));
    f16_blocked_to_rows(im.f16_blocked, out_, in_, reinterpret_cast<uint16_t*>(out.data()));
    return DType::kF16;
  }
  if (im.plain) {
    out.resize(count * dtype_size(im.storage));
    std::memcpy(out.data(), im.weight_rows(), out.size());
    return im.storage;
  }
  // oneDNN's [K, N] in whatever layout it chose: reordered into "ba", which is the [N, K] rows.
  const DT dt = im.weight_md.data_type();
  out.resize(count * (dt == DT::f32 ? sizeof(float) : sizeof(uint16_t)));
  memory rows({{in_, out_}, dt, Tag::ba}, onednn_engine(), out.data());
  dnnl::reorder(im.weight, rows).execute(onednn_stream(), const_cast<memory&>(im.weight), rows);
  onednn_stream().wait();
  return dt == DT::f32 ? DType::kF32 : DType::kBF16;
}

bool Linear::weight_in_place() const {
  if (!impl_) return false;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->mapped != nullptr;
}

bool Linear::preparable() const {
  if (!impl_) return false;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->reorder_pending;
}

bool Linear::few_rows_on_gemv() const {
  if (!impl_) return false;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  // f16: on the blocked layout, or on rows that stay rows (no prepare() can move them mid-product).
  if (compute_ == ComputeType::kF16) return impl_->f16_blocked || !impl_->reorder_pending;
  return impl_->gemv_k_padded > 0;
}

void Linear::forward_share(const float* x, int64_t rows, float* y, bool accumulate, int thread,
                           int threads) const {
  if (compute_ == ComputeType::kF16) {
    const uint16_t* blocked = nullptr;
    const void* rows_ptr = nullptr;
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      if (!impl_->f16_blocked && impl_->reorder_pending)
        fail("Linear::forward_share: f16 rows that prepare() is about to move");
      blocked = impl_->f16_blocked;
      rows_ptr = impl_->weight_rows();
    }
    if (rows > kGemvF16MaxRows) fail("Linear::forward_share: ", rows, " rows");
    if (blocked)
      gemv_f16_blocked_share(x, rows, blocked, out_, in_, y, accumulate, thread, threads);
    else
      gemm_small_m_share(x, rows, rows_ptr, DType::kF16, out_, in_, y, accumulate, thread, threads);
    return;
  }
  int64_t kp = 0;
  const uint16_t* w = nullptr;
  {
    // Once in the blocked layout a weight stays there (prepare() only ever moves it into it).
    std::lock_guard<std::mutex> lock(impl_->mutex);
    kp = impl_->gemv_k_padded;
    w = static_cast<const uint16_t*>(impl_->weight.get_data_handle());
  }
  if (kp == 0 || rows > kGemvBf16MaxRows)
    fail("Linear::forward_share: ", rows, " rows on weights ", kp == 0 ? "not in the gemv layout" : "");
  thread_local std::vector<uint16_t> xb;
  rows_to_padded_bf16(x, rows, in_, kp, xb);
  gemv_bf16_blocked_share(xb.data(), rows, w, out_, kp, y, accumulate, thread, threads);
}

size_t Linear::prepare() const {
  if (!preparable()) return 0;
  Impl& im = *impl_;
  if (compute_ == ComputeType::kF16) {  // mapped f16 rows into the blocked layout, outside the lock
    std::shared_ptr<void> buffer;
    const uint16_t* blocked =
        make_f16_blocked(static_cast<const uint16_t*>(im.mapped), out_, in_, buffer);
    std::lock_guard<std::mutex> lock(im.mutex);
    im.f16_blocked = blocked;
    im.f16_blocked_buffer = std::move(buffer);
    im.mapped = nullptr;
    im.owner.reset();
    im.reorder_pending = false;
    return static_cast<size_t>(f16_blocked_values(out_, in_)) * sizeof(uint16_t);
  }
  auto& eng = onednn_engine();
  const memory::desc blocked_md = blocked_weight_desc(in_, out_, compute_);
  if (blocked_md == im.weight_md) {  // the plain layout is already oneDNN's choice
    std::lock_guard<std::mutex> lock(im.mutex);
    im.reorder_pending = false;  // the weight stays where it lies
    return 0;
  }
  std::shared_ptr<void> buffer;
  memory blocked = weight_memory(blocked_md, buffer);
  // Its own stream: the caller may be a background thread while forwards run on the shared one.
  dnnl::stream stream(eng);
  dnnl::reorder(im.weight, blocked).execute(stream, im.weight, blocked);
  stream.wait();
  std::lock_guard<std::mutex> lock(im.mutex);
  im.weight_md = blocked_md;
  im.weight = blocked;
  im.weight_buffer = std::move(buffer);
  im.gemv_k_padded = gemv_k_padded(blocked_md, in_, out_);
  im.by_rows.clear();  // primitives made for the plain layout
  im.mapped = nullptr;
  im.owner.reset();
  im.reorder_pending = false;
  return blocked_md.get_size();
}

size_t Linear::weight_bytes() const {
  if (!impl_) return 0;
  std::lock_guard<std::mutex> lock(impl_->mutex);  // a background prepare() may swap the layout
  if (impl_->mapped) return static_cast<size_t>(out_ * in_) * dtype_size(impl_->storage);
  if (impl_->f16_blocked) return static_cast<size_t>(f16_blocked_values(out_, in_)) * sizeof(uint16_t);
  return impl_->plain
             ? impl_->weight_f32.size() * sizeof(float) + impl_->weight_16.size() * sizeof(uint16_t)
             : impl_->weight_md.get_size();
}

DType Linear::weight_storage() const {
  if (!impl_) return DType::kF32;
  if (impl_->plain) return impl_->storage;
  return compute_ == ComputeType::kBF16 ? DType::kBF16 : DType::kF32;
}

void Linear::forward_plain(const float* x, int64_t rows, const void* w, float* y, bool accumulate) const {
  Impl& im = *impl_;
  if (rows <= kSmallMaxRows) {
    gemm_small_m(x, rows, w, im.storage, out_, in_, y, accumulate);
    return;
  }
  if (im.storage != DType::kF32 && im.backend == MatmulBackend::kOneDnn)
    return forward_panels_onednn(x, rows, w, y, accumulate);
  const auto m = static_cast<blasint>(rows), k = static_cast<blasint>(in_), ldy = static_cast<blasint>(out_);
  const float beta = accumulate ? 1.0f : 0.0f;
  if (im.storage == DType::kF32) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, ldy, k, 1.0f, x, k,
                static_cast<const float*>(w), k, beta, y, ldy);
    return;
  }
  // 16-bit weights: widen a panel of rows (~16 MB of f32) and multiply it; the widening streams the panel once
  // while sgemm reuses each of its elements `rows` times.
  const int64_t panel_rows = std::max<int64_t>(64, (int64_t{4} << 20) / in_);
  std::lock_guard<std::mutex> lock(im.panel_mutex);
  im.panel.resize(static_cast<size_t>(std::min(panel_rows, out_) * in_));
  for (int64_t n0 = 0; n0 < out_; n0 += panel_rows) {
    const int64_t n1 = std::min(out_, n0 + panel_rows);
    const uint16_t* src = static_cast<const uint16_t*>(w) + n0 * in_;
#pragma omp parallel for schedule(static)
    for (int64_t r = n0; r < n1; ++r)
      convert_to_f32(im.storage, src + (r - n0) * in_, im.panel.data() + (r - n0) * in_, static_cast<size_t>(in_));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, static_cast<blasint>(n1 - n0), k, 1.0f, x, k,
                im.panel.data(), k, beta, y + n0, ldy);
  }
}

void Linear::forward_f16_blocked_panels(const float* x, int64_t rows, const uint16_t* blocked, float* y,
                                        bool accumulate) const {
  // Whole column blocks widened to f32 are oneDNN's own f32 weight layout (BA16a64b): each panel is one
  // widening pass into L2 and one brgemm product, no reorder inside it. ~1 MiB panels.
  Impl& im = *impl_;
  const int64_t block_floats = f16_blocked_k(in_) * kF16BlockColumns;
  const int64_t blocks = (out_ + kF16BlockColumns - 1) / kF16BlockColumns;
  const int64_t per_panel = std::max<int64_t>(1, (int64_t{1} << 18) / block_floats);
  std::lock_guard<std::mutex> lock(im.panel_mutex);
  im.panel.resize(static_cast<size_t>(std::min(per_panel, blocks) * block_floats));
  memory src({{rows, in_}, DT::f32, Tag::ab}, onednn_engine(), const_cast<float*>(x));
  for (int64_t b0 = 0; b0 < blocks; b0 += per_panel) {
    const int64_t count = std::min(per_panel, blocks - b0);
    const int64_t n0 = b0 * kF16BlockColumns, cols = std::min(out_ - n0, count * kF16BlockColumns);
    f16_blocks_to_f32(blocked, in_, b0, count, im.panel.data());
    panel_product(im.panel_prims_blocked, src, memory::desc({in_, cols}, DT::f32, Tag::BA16a64b), im.panel.data(),
                  rows, cols, out_, im.panel_out, y + n0, accumulate);
  }
}

void Linear::forward_panels_onednn(const float* x, int64_t rows, const void* w, float* y, bool accumulate) const {
  // 16-bit rows (f16 before prepare() moves them into blocks; bf16 without a bf16 matmul): a panel of rows at a
  // time widened to f32 (exactly), multiplied by oneDNN's f32 matmul. ~1 MiB panels, widened into L2.
  Impl& im = *impl_;
  const int64_t panel_rows = std::min(out_, std::max<int64_t>(64, ((int64_t{1} << 18) / in_) / 16 * 16));
  std::lock_guard<std::mutex> lock(im.panel_mutex);
  im.panel.resize(static_cast<size_t>(panel_rows * in_));
  memory src({{rows, in_}, DT::f32, Tag::ab}, onednn_engine(), const_cast<float*>(x));
  for (int64_t n0 = 0; n0 < out_; n0 += panel_rows) {
    const int64_t cols = std::min(out_, n0 + panel_rows) - n0;
    const uint16_t* from = static_cast<const uint16_t*>(w) + n0 * in_;
    float* to = im.panel.data();
    parallel_for_if(cols * in_ >= (1 << 16), cols, [&](int64_t r) {
      convert_to_f32(im.storage, from + r * in_, to + r * in_, static_cast<size_t>(in_));
    });
    panel_product(im.panel_prims_plain, src, memory::desc({in_, cols}, DT::f32, Tag::ba), to, rows, cols, out_,
                  im.panel_out, y + n0, accumulate);
  }
}

void Linear::forward(const float* x, int64_t rows, float* y, bool accumulate) const {
  if (rows <= 0) return;
  ScopedKernelTimer timer(KernelKind::kMatmul);
  if (impl_->plain) {
    const uint16_t* blocked = nullptr;
    const void* w = nullptr;
    std::shared_ptr<const void> keep;  // the rows' owner, held while the product reads them
    {
      // prepare() may be moving f16 rows into blocks (and dropping their owner: rows a loader moved into a buffer
      // of its own die with it): take one of the two consistently, and keep the rows alive until the product is
      // done. (ASan caught a forward reading rows that prepare() had just freed.)
      std::lock_guard<std::mutex> lock(impl_->mutex);
      blocked = impl_->f16_blocked;
      w = impl_->weight_rows();
      keep = impl_->owner;
    }
    if (!blocked) return forward_plain(x, rows, w, y, accumulate);
    if (rows <= kGemvF16MaxRows) return gemv_f16_blocked(x, rows, blocked, out_, in_, y, accumulate);
    return forward_f16_blocked_panels(x, rows, blocked, y, accumulate);
  }
  auto& eng = onednn_engine();
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (const int64_t kp = impl_->gemv_k_padded; kp > 0 && rows <= kGemvBf16MaxRows) {
    // Token generation's one row (and a few): the hand-written kernel on the same blocked buffer.
    std::vector<uint16_t>& xb = impl_->bf16_scratch;
    rows_to_padded_bf16(x, rows, in_, kp, xb);
    gemv_bf16_blocked(xb.data(), rows, static_cast<const uint16_t*>(impl_->weight.get_data_handle()), out_,
                      kp, y, accumulate);
    return;
  }
  auto key = std::make_pair(rows, accumulate);
  auto it = impl_->by_rows.find(key);
  if (it == impl_->by_rows.end()) {
    memory::desc src_md({rows, in_}, compute_dt(compute_), Tag::ab);
    memory::desc dst_md({rows, out_}, DT::f32, Tag::ab);
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, impl_->weight_md, dst_md), attr, eng);
    it = impl_->by_rows.emplace(key, Impl::Prim{dnnl::matmul(pd), src_md, dst_md}).first;
  }
  const void* src_ptr = x;
  if (compute_ == ComputeType::kBF16) {
    impl_->bf16_scratch.resize(static_cast<size_t>(rows * in_));
    convert_f32_to_bf16(x, impl_->bf16_scratch.data(), impl_->bf16_scratch.size());
    src_ptr = impl_->bf16_scratch.data();
  }
  memory src(it->second.src_md, eng, const_cast<void*>(src_ptr));
  memory dst(it->second.dst_md, eng, y);
  it->second.matmul.execute(onednn_stream(),
                            {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, impl_->weight}, {DNNL_ARG_DST, dst}});
  onednn_stream().wait();
}

}  // namespace dllm
