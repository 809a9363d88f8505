#include "kernels/matmul.h"

#include "core/error.h"

namespace dllm {

MatMul::MatMul(std::shared_ptr<const quant::LinearQ8> q8) : impl_(std::move(q8)) {
  if (!std::get<1>(impl_)) fail("MatMul: null 8-bit weights");
}

MatMul::MatMul(quant::LinearQ8 q8) : impl_(std::make_shared<const quant::LinearQ8>(std::move(q8))) {}

MatMul::MatMul(std::shared_ptr<const quant::LinearGgml> blocks) : impl_(std::move(blocks)) {
  if (!std::get<2>(impl_)) fail("MatMul: null GGUF-block weights");
}

MatMul::MatMul(quant::LinearGgml blocks) : impl_(std::make_shared<const quant::LinearGgml>(std::move(blocks))) {}

template <class F>
auto MatMul::with(F&& f) const {
  if (const auto* l = std::get_if<Linear>(&impl_)) return f(*l);
  if (const auto* q8 = std::get_if<1>(&impl_)) return f(**q8);
  return f(*std::get<2>(impl_));
}

void MatMul::forward(const float* x, int64_t rows, float* y, bool accumulate) const {
  with([&](const auto& w) { w.forward(x, rows, y, accumulate); });
}

const std::shared_ptr<const quant::LinearQ8>& MatMul::q8() const {
  if (!is_q8()) fail("MatMul: not 8-bit weights");
  return std::get<1>(impl_);
}

const std::shared_ptr<const quant::LinearGgml>& MatMul::ggml() const {
  if (!is_ggml()) fail("MatMul: not GGUF-block weights");
  return std::get<2>(impl_);
}

int64_t MatMul::out_features() const {
  return with([](const auto& w) { return w.out_features(); });
}
int64_t MatMul::in_features() const {
  return with([](const auto& w) { return w.in_features(); });
}
size_t MatMul::weight_bytes() const {
  return with([](const auto& w) { return w.weight_bytes(); });
}

}  // namespace dllm
