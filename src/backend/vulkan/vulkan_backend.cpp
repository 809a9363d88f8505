#if DLLM_HAVE_VULKAN

#include "backend/vulkan/vulkan_backend.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"
#include "core/ggml_types.h"
#include "kernels/quant/linear_ggml.h"
#include "vulkan/pack.h"

namespace dllm {

struct VulkanBackend::Weight {
  // How the device holds it: f32 / f16 / bf16 rows, or GGUF blocks as pack_q8_0 / pack_q4_k lay them out
  // (dequantised in the shader).
  enum class Format { kF32, kF16, kBF16, kQ8_0, kQ4_K } format = Format::kF32;
  int64_t n = 0, k = 0;
  std::unique_ptr<vk::Buffer> data;    // the rows, or the blocks' quants
  std::unique_ptr<vk::Buffer> scales;  // Q8_0: d [n, k / 32]; Q4_K: (d·scale, dmin·min) [n, k / 32, 2]
};

// A KvCache's keys and values on the device: per layer, rows of kv_dim floats, `capacity` rows allocated.
struct VulkanBackend::DeviceKv {
  std::shared_ptr<vk::Context> ctx;  // first: outlives the buffers, also when the cache outlives the model
  const VulkanBackend* owner = nullptr;
  int64_t kv_dim = 0;
  std::vector<std::unique_ptr<vk::Buffer>> k, v;
  std::vector<int64_t> capacity;
};

namespace {

size_t floats(int64_t n) {
  return static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float);
}

uint32_t u32(int64_t v) {
  if (v < 0 || v > static_cast<int64_t>(UINT32_MAX))
    fail("Vulkan backend: size ", v, " does not fit 32 bits");
  return static_cast<uint32_t>(v);
}

std::vector<uint32_t> as_u32(std::span<const uint8_t> flags) {
  std::vector<uint32_t> out(flags.size());
  for (size_t i = 0; i < flags.size(); ++i) out[i] = flags[i] ? 1u : 0u;
  return out;
}

}  // namespace

VulkanBackend::VulkanBackend(int device)
    : ctx_(std::make_shared<vk::Context>(device)), ops_(std::make_unique<vk::Ops>(*ctx_)) {}

VulkanBackend::~VulkanBackend() {
  ops_->abandon();
}

std::string VulkanBackend::describe() const {
  const vk::DeviceInfo& i = ctx_->info();
  char line[256];
  std::snprintf(line, sizeof line, "vulkan device %d: %s (%s), %.1f MB of weights on the device", i.index,
                i.name.c_str(), i.type.c_str(), static_cast<double>(held_bytes_) / 1e6);
  return line;
}

namespace {

// The GGUF block type the device multiplies as stored (Q8_0, Q4_K: the loader keeps them as views of the
// file's blocks for a device backend), or nullopt: dequantised to f32 at load.
std::optional<GgmlType> device_blocks(const MatMul& w) {
  if (!w.is_ggml()) return std::nullopt;
  const GgmlType t = w.ggml()->type();
  if (t == GgmlType::kQ8_0 || t == GgmlType::kQ4_K) return t;
  return std::nullopt;
}

}  // namespace

size_t VulkanBackend::bytes_to_hold(const MatMul& w) const {
  const auto values = static_cast<size_t>(w.out_features() * w.in_features());
  if (auto t = device_blocks(w))  // Q8_0: 8-bit quants + an f32 scale per 32; Q4_K: 4-bit + two f32 per 32
    return *t == GgmlType::kQ8_0 ? values + values / 32 * 4 : values / 2 + values / 32 * 8;
  if (w.is_q8() || w.is_ggml() || w.is_packed()) return values * sizeof(float);  // dequantised to f32
  return w.weight_bytes();
}

void VulkanBackend::reserve(size_t bytes) {
  const vk::DeviceInfo& i = ctx_->info();
  if (bytes > i.device_local_bytes)
    fail("--backend vulkan: the model's weights need ", bytes / 1e6, " MB on the device, and ", i.name,
         " has ", i.device_local_bytes / 1e6, " MB of device-local memory (nothing was copied)");
}

void VulkanBackend::hold(const MatMul& w) {
  if (weights_.count(&w)) return;
  auto dw = std::make_unique<Weight>();
  dw->n = w.out_features();
  dw->k = w.in_features();
  auto upload = [&](const auto& values) {
    using T = typename std::decay_t<decltype(values)>::value_type;
    auto b = std::make_unique<vk::Buffer>(*ctx_, std::max<size_t>(values.size() * sizeof(T), 16));
    b->upload(std::span<const T>(values));
    held_bytes_ += b->bytes();
    traffic_.uploaded += static_cast<double>(values.size() * sizeof(T));
    return b;
  };
  if (const auto blocks = device_blocks(w)) {
    const void* data = w.ggml()->data();
    if (*blocks == GgmlType::kQ8_0) {
      const vk::PackedQ8_0 p = vk::pack_q8_0(data, u32(dw->n), u32(dw->k));
      dw->format = Weight::Format::kQ8_0;
      dw->scales = upload(p.scales);
      dw->data = upload(p.quants);
    } else {
      const vk::PackedQ4_K p = vk::pack_q4_k(data, u32(dw->n), u32(dw->k));
      dw->format = Weight::Format::kQ4_K;
      dw->scales = upload(p.scale_min);
      dw->data = upload(p.quants);
    }
    weights_.emplace(&w, std::move(dw));
    return;
  }
  std::vector<uint8_t> rows;
  const DType type = w.export_rows(rows);
  if (type == DType::kF32) {
    dw->format = Weight::Format::kF32;
    dw->data = upload(rows);
  } else {  // F16 / BF16: two to a uint32, rows padded to an even length
    dw->format = type == DType::kF16 ? Weight::Format::kF16 : Weight::Format::kBF16;
    dw->data =
        upload(vk::pack_half_rows(reinterpret_cast<const uint16_t*>(rows.data()), u32(dw->n), u32(dw->k)));
  }
  weights_.emplace(&w, std::move(dw));
}

void VulkanBackend::hold(std::span<const float> v) {
  if (v.empty() || vectors_.count(v.data())) return;
  auto b = std::make_unique<vk::Buffer>(*ctx_, v.size_bytes());
  b->upload(v);
  held_bytes_ += b->bytes();
  vectors_.emplace(v.data(), std::move(b));
}

const VulkanBackend::Weight& VulkanBackend::weight(const MatMul& w) {
  auto it = weights_.find(&w);
  if (it == weights_.end()) {  // a matrix the load did not name (cannot happen for the families today)
    hold(w);
    it = weights_.find(&w);
  }
  return *it->second;
}

const vk::Buffer& VulkanBackend::vector(std::span<const float> v) {
  auto it = vectors_.find(v.data());
  if (it == vectors_.end()) {
    hold(v);
    it = vectors_.find(v.data());
  }
  return *it->second;
}

vk::Buffer& VulkanBackend::grown(std::unique_ptr<vk::Buffer>& slot, size_t bytes) {
  if (slot && slot->bytes() >= bytes) return *slot;
  if (slot && ops_->recording()) retired_.push_back(std::move(slot));
  slot = std::make_unique<vk::Buffer>(*ctx_, std::max<size_t>(bytes, 16));
  return *slot;
}

template <class T>
vk::Buffer& VulkanBackend::staged(const std::vector<T>& values) {
  vk::Buffer& b = ops_->temporary(std::max<size_t>(values.size() * sizeof(T), 16));
  b.upload(std::span<const T>(values));
  traffic_.uploaded += static_cast<double>(values.size() * sizeof(T));
  return b;
}

void VulkanBackend::ensure_recording() {
  if (!ops_->recording()) ops_->begin();
}

Tensor VulkanBackend::activation(Slot slot, int64_t rows, int64_t cols) {
  return {&grown(slots_[static_cast<int>(slot)], floats(rows * cols)), rows, cols};
}

void VulkanBackend::begin(const ForwardSetup& setup) {
  ops_->abandon();
  retired_.clear();
  setup_ = setup;
  // The positions' cos/sin, from the same f32 table the CPU rotates with.
  const int64_t rows = static_cast<int64_t>(setup.positions.size());
  rotary_half_ = setup.rope->head_dim() / 2;
  std::vector<float> c(static_cast<size_t>(rows * rotary_half_)), s(c.size());
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(setup.rope->cos(setup.positions[r]), rotary_half_, c.data() + r * rotary_half_);
    std::copy_n(setup.rope->sin(setup.positions[r]), rotary_half_, s.data() + r * rotary_half_);
  }
  grown(cos_, floats(rows * rotary_half_)).upload(std::span<const float>(c));
  grown(sin_, floats(rows * rotary_half_)).upload(std::span<const float>(s));
  traffic_.uploaded += 2.0 * static_cast<double>(c.size() * sizeof(float));
  if (!setup.key_valid.empty()) {
    const auto flags = as_u32(setup.key_valid);
    grown(key_valid_, flags.size() * sizeof(uint32_t)).upload(std::span<const uint32_t>(flags));
  }
  if (!setup.query_valid.empty()) {
    const auto flags = as_u32(setup.query_valid);
    grown(query_keep_, flags.size() * sizeof(uint32_t)).upload(std::span<const uint32_t>(flags));
  }
  ops_->begin();
}

void VulkanBackend::finish() {
  if (ops_->recording()) {
    ops_->submit();
    ++traffic_.submits;
  }
  retired_.clear();
}

void VulkanBackend::abandon() {
  ops_->abandon();
  retired_.clear();
}

void VulkanBackend::write(const Tensor& t, const float* values) {
  // Before the recording reads t (the forward writes its input first): a plain upload.
  buf(t).upload(std::span<const float>(values, static_cast<size_t>(t.size())));
  traffic_.uploaded += static_cast<double>(t.size() * sizeof(float));
}

void VulkanBackend::read(const Tensor& t, int64_t first, int64_t count, float* out) {
  if (ops_->recording()) {  // the ops after this one open the next recording (ensure_recording)
    ops_->submit();
    ++traffic_.submits;
  }
  buf(t).download(std::span<float>(out, static_cast<size_t>(count * t.cols)),
                  static_cast<size_t>(first * t.cols) * sizeof(float));
  traffic_.downloaded += static_cast<double>(count * t.cols * sizeof(float));
}

void VulkanBackend::logit_stats(const Tensor& t, int64_t rows, LogitStats* out) {
  ensure_recording();
  vk::Buffer& argmax = grown(stats_argmax_, static_cast<size_t>(rows) * sizeof(uint32_t));
  vk::Buffer& values = grown(stats_values_, static_cast<size_t>(rows) * 3 * sizeof(float));
  ops_->token_stats(buf(t), argmax, values, u32(rows), u32(t.cols));
  ops_->submit();
  ++traffic_.submits;
  std::vector<uint32_t> a(static_cast<size_t>(rows));
  std::vector<float> v(static_cast<size_t>(rows) * 3);
  argmax.download(std::span<uint32_t>(a));
  values.download(std::span<float>(v));
  traffic_.downloaded += static_cast<double>(a.size() * sizeof(uint32_t) + v.size() * sizeof(float));
  for (int64_t r = 0; r < rows; ++r)
    out[r] = LogitStats{static_cast<int32_t>(a[r]), v[r * 3], v[r * 3 + 1], v[r * 3 + 2]};
}

void VulkanBackend::rms_norm(const Tensor& x, std::span<const float> w, float eps, const Tensor& out) {
  ensure_recording();
  const vk::Buffer& weight_buffer = vector(w);
  if (x.storage != out.storage) {
    ops_->rms_norm(buf(x), weight_buffer, buf(out), u32(x.rows), u32(x.cols), eps);
    return;
  }
  // In place (the per-head q / k norms): through a scratch buffer, since the shader reads x while it writes.
  vk::Buffer& scratch = ops_->temporary(floats(x.size()));
  ops_->rms_norm(buf(x), weight_buffer, scratch, u32(x.rows), u32(x.cols), eps);
  ops_->copy(scratch, 0, buf(out), 0, static_cast<size_t>(x.size()) * sizeof(float));
}

void VulkanBackend::matmul(const MatMul& w, const Tensor& x, const Tensor& y, bool accumulate) {
  ensure_recording();
  const Weight& dw = weight(w);
  if (x.cols != dw.k || y.cols != dw.n)
    fail("Vulkan matmul: x has ", x.cols, " columns and y ", y.cols, " for a ", dw.n, " x ", dw.k, " weight");
  const uint32_t m = u32(x.rows), n = u32(dw.n), k = u32(dw.k);
  switch (dw.format) {
    case Weight::Format::kF32:
      return ops_->matmul_f32(buf(x), *dw.data, buf(y), m, n, k, accumulate);
    case Weight::Format::kF16:
      return ops_->matmul_f16(buf(x), *dw.data, buf(y), m, n, k, accumulate);
    case Weight::Format::kBF16:
      return ops_->matmul_bf16(buf(x), *dw.data, buf(y), m, n, k, accumulate);
    case Weight::Format::kQ8_0:
      return ops_->matmul_q8_0(buf(x), *dw.scales, *dw.data, buf(y), m, n, k, accumulate);
    case Weight::Format::kQ4_K:
      return ops_->matmul_q4_k(buf(x), *dw.scales, *dw.data, buf(y), m, n, k, accumulate);
  }
}

void VulkanBackend::matmul_group(std::span<const MatMul* const> ws, const Tensor& x,
                                 std::span<const Tensor> ys) {
  for (size_t i = 0; i < ws.size(); ++i) matmul(*ws[i], x, ys[i], /*accumulate=*/false);
}

void VulkanBackend::add_bias(const Tensor& x, std::span<const float> bias) {
  ensure_recording();
  ops_->add_bias(buf(x), vector(bias), u32(x.rows), u32(x.cols));
}

void VulkanBackend::rope(const Tensor& x, int64_t heads) {
  ensure_recording();
  const int64_t head_dim = x.cols / heads;
  if (x.rows != static_cast<int64_t>(setup_.positions.size()))
    fail("Vulkan rope: ", x.rows, " rows for ", setup_.positions.size(), " positions");
  ops_->rope_neox(buf(x), u32(x.rows), u32(heads), u32(head_dim), u32(rotary_half_), *cos_, *sin_);
}

void VulkanBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionShape& s,
                              const Tensor& out) {
  ensure_recording();
  const auto keys = static_cast<size_t>(s.batch * s.kv_len);
  const vk::Buffer* valid = nullptr;
  if (!setup_.key_valid.empty()) {
    if (setup_.key_valid.size() != keys)
      fail("Vulkan attention: a key mask of ", setup_.key_valid.size(), " for ", keys, " keys");
    valid = key_valid_.get();
  } else {
    if (!ones_ || ones_->bytes() < keys * sizeof(uint32_t)) {
      grown(ones_, keys * sizeof(uint32_t) * 2);
      const std::vector<uint32_t> all(ones_->bytes() / sizeof(uint32_t), 1u);
      ones_->upload(std::span<const uint32_t>(all));
    }
    valid = ones_.get();
  }
  vk::Buffer& scores = grown(
      scores_, vk::Ops::attention_scratch_bytes(u32(s.batch), u32(s.q_len), u32(s.kv_len), u32(s.heads)));
  ops_->attention(buf(q), buf(k), buf(v), *valid, scores, buf(out), u32(s.batch), u32(s.q_len), u32(s.kv_len),
                  u32(s.heads), u32(s.kv_heads), u32(s.head_dim), u32(s.block), u32(s.q_offset));
}

void VulkanBackend::zero_invalid_rows(const Tensor& x) {
  if (setup_.query_valid.empty()) return;
  ensure_recording();
  ops_->zero_rows(buf(x), *query_keep_, u32(x.rows), u32(x.cols));
}

void VulkanBackend::silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  ensure_recording();
  ops_->silu_mul(buf(gate), buf(up), buf(out), u32(gate.size()));
}

void VulkanBackend::add(const Tensor& x, const Tensor& y) {
  ensure_recording();
  ops_->add(buf(x), buf(y), u32(x.size()));
}

void VulkanBackend::copy_rows(const Tensor& src, int64_t src_row, const Tensor& dst, int64_t dst_row,
                              int64_t count) {
  ensure_recording();
  ops_->copy(buf(src), static_cast<size_t>(src_row * src.cols) * sizeof(float), buf(dst),
             static_cast<size_t>(dst_row * dst.cols) * sizeof(float),
             static_cast<size_t>(count * src.cols) * sizeof(float));
}

// Each expert over its rows, one after another in the runs' order: its rows gathered from h, the three
// products and SwiGLU, and the weighted rows added into out (the rows of one expert are distinct, so one
// scatter has no conflicts; the runs' order is the order of the sums, as on the CPU).
void VulkanBackend::experts(std::span<const ExpertRun> runs, const Tensor& h, const Tensor& out) {
  ensure_recording();
  const int64_t d = h.cols;
  ops_->zero_rows(buf(out), staged(std::vector<uint32_t>(static_cast<size_t>(out.rows), 0u)), u32(out.rows),
                  u32(out.cols));
  for (const ExpertRun& run : runs) {
    const auto m = static_cast<int64_t>(run.rows.size());
    const int64_t width = run.gate->out_features();
    std::vector<uint32_t> index(run.rows.size());
    for (size_t i = 0; i < index.size(); ++i) index[i] = u32(run.rows[i]);
    vk::Buffer& rows = staged(index);
    vk::Buffer& weights = staged(run.weights);
    const Tensor in{&ops_->temporary(floats(m * d)), m, d};
    const Tensor g{&ops_->temporary(floats(m * width)), m, width};
    const Tensor u{&ops_->temporary(floats(m * width)), m, width};
    const Tensor y{&ops_->temporary(floats(m * d)), m, d};
    ops_->gather_rows(buf(h), rows, buf(in), u32(m), u32(d));
    matmul(*run.gate, in, g, false);
    matmul(*run.up, in, u, false);
    ops_->silu_mul(buf(g), buf(u), buf(g), u32(m * width));
    matmul(*run.down, g, y, false);
    ops_->scatter_add_weighted(buf(out), buf(y), rows, weights, u32(m), u32(d));
  }
}

VulkanBackend::DeviceKv& VulkanBackend::device_kv(KvCache& cache) {
  auto* kv = static_cast<DeviceKv*>(cache.device.get());
  if (!kv || kv->owner != this)
    fail("Vulkan backend: this KV cache was filled by another backend or model; store it again");
  return *kv;
}

void VulkanBackend::kv_reset(KvCache& cache, int64_t layers, int64_t batch, int64_t len, int64_t kv_dim) {
  cache.clear();
  cache.batch = batch;
  cache.seq_len = len;
  cache.kv_dim = kv_dim;
  cache.valid.assign(static_cast<size_t>(batch * len), 1);
  auto kv = std::make_shared<DeviceKv>();
  kv->ctx = ctx_;
  kv->owner = this;
  kv->kv_dim = kv_dim;
  const int64_t rows = std::max<int64_t>(batch * len, 64);
  for (int64_t l = 0; l < layers; ++l) {
    kv->k.push_back(std::make_unique<vk::Buffer>(*ctx_, floats(rows * kv_dim)));
    kv->v.push_back(std::make_unique<vk::Buffer>(*ctx_, floats(rows * kv_dim)));
    kv->capacity.push_back(rows);
  }
  cache.device = std::move(kv);
}

void VulkanBackend::kv_write(KvCache& cache, int64_t layer, const Tensor& k, const Tensor& v, int64_t batch,
                             int64_t seq, int64_t at) {
  ensure_recording();
  DeviceKv& kv = device_kv(cache);
  const auto l = static_cast<size_t>(layer);
  const int64_t dim = kv.kv_dim, len = cache.seq_len;
  const int64_t needed = (batch - 1) * len + at + seq;
  if (needed > kv.capacity[l]) {  // the block cache grows: twice the rows, the old ones copied over
    const int64_t rows = std::max(needed, 2 * kv.capacity[l]);
    for (auto* side : {&kv.k, &kv.v}) {
      auto bigger = std::make_unique<vk::Buffer>(*ctx_, floats(rows * dim));
      ops_->copy(*(*side)[l], 0, *bigger, 0, static_cast<size_t>(kv.capacity[l] * dim) * sizeof(float));
      retired_.push_back(std::move((*side)[l]));
      (*side)[l] = std::move(bigger);
    }
    kv.capacity[l] = rows;
  }
  const auto bytes = static_cast<size_t>(seq * dim) * sizeof(float);
  for (int64_t b = 0; b < batch; ++b) {
    const auto from = static_cast<size_t>(b * seq * dim) * sizeof(float);
    const auto to = static_cast<size_t>((b * len + at) * dim) * sizeof(float);
    ops_->copy(buf(k), from, *kv.k[l], to, bytes);
    ops_->copy(buf(v), from, *kv.v[l], to, bytes);
  }
}

Tensor VulkanBackend::kv_keys(KvCache& cache, int64_t layer, int64_t rows) {
  return {device_kv(cache).k[static_cast<size_t>(layer)].get(), rows, cache.kv_dim};
}

Tensor VulkanBackend::kv_values(KvCache& cache, int64_t layer, int64_t rows) {
  return {device_kv(cache).v[static_cast<size_t>(layer)].get(), rows, cache.kv_dim};
}

}  // namespace dllm

#endif
