#include "kernels/linear.h"

#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/onednn.h"
#include "kernels/profile.h"

namespace dllm {

using dnnl::memory;
using Tag = memory::format_tag;
using DT = memory::data_type;

namespace {

// The weight layout is chosen by oneDNN for this many rows; other row counts reuse it.
constexpr int64_t kPackingRows = 256;

DT compute_dt(ComputeType c) { return c == ComputeType::kBF16 ? DT::bf16 : DT::f32; }

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

ComputeType effective_compute(ComputeType requested) {
  return requested == ComputeType::kBF16 && !bf16_matmul_supported() ? ComputeType::kF32 : requested;
}

struct Linear::Impl {
  MatmulBackend backend = MatmulBackend::kOneDnn;
  std::vector<float> weight_rows;  // OpenBLAS: the [N, K] weight as f32, row-major (used as Bᵀ by sgemm)
  memory::desc weight_md;  // oneDNN: [K, N] in its blocked layout
  memory weight;
  mutable std::mutex mutex;
  struct Prim {
    dnnl::matmul matmul;
    memory::desc src_md, dst_md;
  };
  mutable std::map<std::pair<int64_t, bool>, Prim> by_rows;  // (rows, accumulate) -> primitive
  mutable std::vector<uint16_t> bf16_scratch;
};

Linear::Linear(const void* weight, DType stored, int64_t out_features, int64_t in_features, ComputeType compute)
    : impl_(std::make_unique<Impl>()), out_(out_features), in_(in_features), compute_(effective_compute(compute)) {
  if (compute_ == ComputeType::kF32 && f32_matmul_backend() == MatmulBackend::kOpenBlas) {
    impl_->backend = MatmulBackend::kOpenBlas;
    impl_->weight_rows.resize(static_cast<size_t>(out_ * in_));
    convert_to_f32(stored, weight, impl_->weight_rows.data(), impl_->weight_rows.size());
    return;
  }
  auto& eng = onednn_engine();
  const DT dt = compute_dt(compute_);
  // Let oneDNN pick the weight layout for a typical matmul, then reorder the weight into it once.
  memory::desc src_any({kPackingRows, in_}, dt, Tag::ab);
  memory::desc wei_any({in_, out_}, dt, Tag::any);
  memory::desc dst_md({kPackingRows, out_}, DT::f32, Tag::ab);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_any, wei_any, dst_md), eng);
  impl_->weight_md = pd.weights_desc();
  impl_->weight = memory(impl_->weight_md, eng);

  // The stored [N, K] row-major weight is [K, N] with layout "ba". F16 goes through f32 first.
  std::vector<float> staged;
  DT stored_dt = DT::f32;
  const void* src_ptr = weight;
  if (stored == DType::kF16) {
    staged.resize(static_cast<size_t>(out_ * in_));
    convert_to_f32(stored, weight, staged.data(), staged.size());
    src_ptr = staged.data();
  } else {
    stored_dt = stored == DType::kBF16 ? DT::bf16 : DT::f32;
  }
  memory user({{in_, out_}, stored_dt, Tag::ba}, eng, const_cast<void*>(src_ptr));
  dnnl::reorder(user, impl_->weight).execute(onednn_stream(), user, impl_->weight);
  onednn_stream().wait();
}

Linear::Linear() = default;
Linear::~Linear() = default;
Linear::Linear(Linear&&) noexcept = default;
Linear& Linear::operator=(Linear&&) noexcept = default;

size_t Linear::weight_bytes() const {
  if (!impl_) return 0;
  return impl_->backend == MatmulBackend::kOpenBlas ? impl_->weight_rows.size() * sizeof(float)
                                                     : impl_->weight_md.get_size();
}

void Linear::forward(const float* x, int64_t rows, float* y, bool accumulate) const {
  if (rows <= 0) return;
  ScopedKernelTimer timer(KernelKind::kMatmul);
  if (impl_->backend == MatmulBackend::kOpenBlas) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows), static_cast<blasint>(out_),
                static_cast<blasint>(in_), 1.0f, x, static_cast<blasint>(in_), impl_->weight_rows.data(),
                static_cast<blasint>(in_), accumulate ? 1.0f : 0.0f, y, static_cast<blasint>(out_));
    return;
  }
  auto& eng = onednn_engine();
  std::lock_guard<std::mutex> lock(impl_->mutex);
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
