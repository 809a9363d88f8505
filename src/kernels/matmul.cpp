#include "kernels/matmul.h"

#include <array>
#include <cctype>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "kernels/gemv_bf16.h"

namespace dllm {

namespace {
constexpr size_t kMaxGroup = 8;  // matrices run as one group at most (a layer has 3: q, k, v)
}  // namespace

MatMul::MatMul(std::shared_ptr<const quant::LinearQ8> q8) : impl_(std::move(q8)) {
  if (!std::get<1>(impl_)) fail("MatMul: null 8-bit weights");
}

MatMul::MatMul(quant::LinearQ8 q8) : impl_(std::make_shared<const quant::LinearQ8>(std::move(q8))) {}

MatMul::MatMul(std::shared_ptr<const quant::LinearGgml> blocks) : impl_(std::move(blocks)) {
  if (!std::get<2>(impl_)) fail("MatMul: null GGUF-block weights");
}

MatMul::MatMul(quant::LinearGgml blocks)
    : impl_(std::make_shared<const quant::LinearGgml>(std::move(blocks))) {}

MatMul::MatMul(std::shared_ptr<const quant::LinearPacked> packed) : impl_(std::move(packed)) {
  if (!std::get<3>(impl_)) fail("MatMul: null packed weights");
}

MatMul::MatMul(quant::LinearPacked packed)
    : impl_(std::make_shared<const quant::LinearPacked>(std::move(packed))) {}

template <class F>
auto MatMul::with(F&& f) const {
  if (const auto* l = std::get_if<Linear>(&impl_)) return f(*l);
  if (const auto* q8 = std::get_if<1>(&impl_)) return f(**q8);
  if (const auto* g = std::get_if<2>(&impl_)) return f(**g);
  return f(*std::get<3>(impl_));
}

void MatMul::forward(const float* x, int64_t rows, float* y, bool accumulate) const {
  with([&](const auto& w) { w.forward(x, rows, y, accumulate); });
}

bool MatMul::grouping_enabled() {
  // DLLM_GROUP_MATMULS=0 runs each matrix on its own (A/B timing of the grouped form).
  static const bool enabled = [] {
    const char* v = std::getenv("DLLM_GROUP_MATMULS");
    return !(v && std::string(v) == "0");
  }();
  return enabled;
}

void MatMul::forward_group(std::span<const MatMul* const> ws, const float* x, int64_t rows,
                           std::span<float* const> ys) {
  if (ws.size() != ys.size())
    fail("MatMul::forward_group: ", ws.size(), " matrices, ", ys.size(), " outputs");
  bool grouped = grouping_enabled() && ws.size() <= kMaxGroup;
  for (const MatMul* w : ws)
    grouped = grouped && w->is_packed() && quant::LinearPacked::can_group(*ws[0]->packed(), *w->packed());
  if (!grouped) {
    for (size_t i = 0; i < ws.size(); ++i) ws[i]->forward(x, rows, ys[i]);
    return;
  }
  std::array<quant::LinearPacked::Output, kMaxGroup> outs;
  for (size_t i = 0; i < ws.size(); ++i) outs[i] = {ws[i]->packed().get(), ys[i]};
  quant::LinearPacked::forward_group({outs.data(), ws.size()}, x, rows);
}

static_assert(MatMul::kShareRows <= quant::LinearPacked::kShareRows &&
              MatMul::kShareRows <= kGemvBf16MaxRows);

bool MatMul::can_share_group(std::span<const MatMul* const> ws) {
  if (ws.empty() || ws.size() > kMaxGroup) return false;
  const bool linear = std::holds_alternative<Linear>(ws[0]->impl_);
  for (const MatMul* w : ws) {
    if (linear ? !std::holds_alternative<Linear>(w->impl_) || !std::get<Linear>(w->impl_).few_rows_on_gemv()
               : !w->is_packed() || !quant::LinearPacked::can_group(*ws[0]->packed(), *w->packed()))
      return false;
  }
  return true;
}

void MatMul::forward_group_share(std::span<const MatMul* const> ws, const float* x, int64_t rows,
                                 std::span<float* const> ys, bool accumulate, int thread, int threads) {
  if (ws.size() != ys.size() || !can_share_group(ws))
    fail("MatMul::forward_group_share: ", ws.size(), " matrices (", ys.size(),
         " outputs) that are neither packed panels of one type and width nor 16-bit weights on the gemv "
         "kernel");
  if (std::holds_alternative<Linear>(ws[0]->impl_)) {  // each matrix split on its own
    for (size_t i = 0; i < ws.size(); ++i)
      std::get<Linear>(ws[i]->impl_).forward_share(x, rows, ys[i], accumulate, thread, threads);
    return;
  }
  std::array<quant::LinearPacked::Output, kMaxGroup> outs;
  for (size_t i = 0; i < ws.size(); ++i) outs[i] = {ws[i]->packed().get(), ys[i]};
  quant::LinearPacked::forward_group_share({outs.data(), ws.size()}, x, rows, accumulate, thread, threads);
}

std::string MatMul::runs_as() const {
  auto lower = [](GgmlType t) {
    const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(t));
    std::string name = info ? std::string(info->name) : "?";
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return name;
  };
  if (const auto* l = std::get_if<Linear>(&impl_)) {
    if (l->compute() == ComputeType::kBF16 && !bf16_matmul_supported()) return "bf16 weights, f32 products";
    return compute_type_name(l->compute());
  }
  if (is_q8()) return "q8_0 rows, int8 products";
  if (is_ggml()) return lower(ggml()->type()) + " blocks in place, int8 products";
  return lower(packed()->type()) + " blocks in 16-row panels, int8 products";
}

DType MatMul::export_rows(std::vector<uint8_t>& out) const {
  if (const auto* linear = std::get_if<Linear>(&impl_)) return linear->export_rows(out);
  const int64_t n = out_features(), k = in_features();
  out.resize(static_cast<size_t>(n * k) * sizeof(float));
  auto* values = reinterpret_cast<float*>(out.data());
  for (int64_t r = 0; r < n; ++r) dequantize_row(r, values + r * k);
  return DType::kF32;
}

void MatMul::dequantize_row(int64_t row, float* out) const {
  if (std::holds_alternative<Linear>(impl_)) fail("MatMul: dequantize_row on plain f32/bf16 weights");
  std::visit(
      [&](const auto& w) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(w)>, Linear>) w->dequantize_row(row, out);
      },
      impl_);
}

MatMul MatMul::share() const {
  MatMul m;
  std::visit(
      [&](const auto& w) {
        if constexpr (std::is_same_v<std::decay_t<decltype(w)>, Linear>)
          fail("MatMul: plain f32/bf16 weights cannot be shared");
        else
          m.impl_ = w;
      },
      impl_);
  return m;
}

bool MatMul::same_weights(const MatMul& other) const {
  if (impl_.index() != other.impl_.index() || std::holds_alternative<Linear>(impl_)) return false;
  return std::visit(
      [&](const auto& w) {
        if constexpr (std::is_same_v<std::decay_t<decltype(w)>, Linear>)
          return false;
        else
          return static_cast<const void*>(w.get()) ==
                 static_cast<const void*>(std::get<std::decay_t<decltype(w)>>(other.impl_).get());
      },
      impl_);
}

const std::shared_ptr<const quant::LinearQ8>& MatMul::q8() const {
  if (!is_q8()) fail("MatMul: not 8-bit weights");
  return std::get<1>(impl_);
}

const std::shared_ptr<const quant::LinearGgml>& MatMul::ggml() const {
  if (!is_ggml()) fail("MatMul: not GGUF-block weights");
  return std::get<2>(impl_);
}

const std::shared_ptr<const quant::LinearPacked>& MatMul::packed() const {
  if (!is_packed()) fail("MatMul: not packed weights");
  return std::get<3>(impl_);
}

int64_t MatMul::out_features() const {
  return with([](const auto& w) { return w.out_features(); });
}
int64_t MatMul::in_features() const {
  return with([](const auto& w) { return w.in_features(); });
}
size_t MatMul::prepare() const {
  const auto* l = std::get_if<Linear>(&impl_);
  return l ? l->prepare() : 0;
}

bool MatMul::preparable() const {
  const auto* l = std::get_if<Linear>(&impl_);
  return l && l->preparable();
}

size_t MatMul::weight_bytes() const {
  return with([](const auto& w) { return w.weight_bytes(); });
}

}  // namespace dllm
