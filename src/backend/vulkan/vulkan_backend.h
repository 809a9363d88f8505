// The Vulkan backend: the forward's ops as compute shaders (src/vulkan) recorded into one command buffer per
// forward, submitted once; the weights copied to the device once, at load, in the type they are held in (f32,
// f16, bf16; quantized matrices dequantised to f32 for now); the activations and the KV cache in device
// buffers. What crosses to the host in a forward: the embedded tokens (the table stays on the host), the
// positions' cos/sin and the masks, once; the logits at the end; a mixture-of-experts layer's router logits.
#pragma once

#if DLLM_HAVE_VULKAN

#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "vulkan/buffer.h"
#include "vulkan/context.h"
#include "vulkan/ops.h"

namespace dllm {

class VulkanBackend final : public Backend {
 public:
  explicit VulkanBackend(int device);
  ~VulkanBackend() override;

  BackendKind kind() const override { return BackendKind::kVulkan; }
  std::string describe() const override;
  size_t bytes_to_hold(const MatMul& w) const override;
  void reserve(size_t bytes) override;
  void hold(const MatMul& w) override;
  void hold(std::span<const float> v) override;
  size_t held_bytes() const override { return held_bytes_; }

  Tensor activation(Slot slot, int64_t rows, int64_t cols) override;
  void begin(const ForwardSetup& setup) override;
  void finish() override;
  void abandon() override;
  void write(const Tensor& t, const float* values) override;
  void read(const Tensor& t, int64_t first, int64_t count, float* out) override;
  void logit_stats(const Tensor& t, int64_t rows, LogitStats* out) override;
  void rms_norm(const Tensor& x, std::span<const float> w, float eps, const Tensor& out) override;
  void matmul(const MatMul& w, const Tensor& x, const Tensor& y, bool accumulate) override;
  void matmul_group(std::span<const MatMul* const> ws, const Tensor& x, std::span<const Tensor> ys) override;
  void add_bias(const Tensor& x, std::span<const float> bias) override;
  void rope(const Tensor& x, int64_t heads) override;
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionShape& shape,
                 const Tensor& out) override;
  void zero_invalid_rows(const Tensor& x) override;
  void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void add(const Tensor& x, const Tensor& y) override;
  void copy_rows(const Tensor& src, int64_t src_row, const Tensor& dst, int64_t dst_row,
                 int64_t count) override;
  void experts(std::span<const ExpertRun> runs, const Tensor& h, const Tensor& out) override;
  void kv_reset(KvCache& cache, int64_t layers, int64_t batch, int64_t len, int64_t kv_dim) override;
  void kv_write(KvCache& cache, int64_t layer, const Tensor& k, const Tensor& v, int64_t batch, int64_t seq,
                int64_t at) override;
  Tensor kv_keys(KvCache& cache, int64_t layer, int64_t rows) override;
  Tensor kv_values(KvCache& cache, int64_t layer, int64_t rows) override;
  void kv_truncate(KvCache&, int64_t, int64_t) override {}  // the rows past seq_len are simply not read

  Traffic traffic() const override { return traffic_; }

 private:
  struct Weight;
  struct DeviceKv;
  static vk::Buffer& buf(const Tensor& t) { return *static_cast<vk::Buffer*>(t.storage); }
  const Weight& weight(const MatMul& w);
  const vk::Buffer& vector(std::span<const float> v);
  vk::Buffer& grown(std::unique_ptr<vk::Buffer>& slot, size_t bytes);
  // A buffer of `values` for this forward's recording.
  template <class T>
  vk::Buffer& staged(const std::vector<T>& values);
  DeviceKv& device_kv(KvCache& cache);
  void ensure_recording();

  std::shared_ptr<vk::Context> ctx_;  // first: destroyed last (buffers, the caches' included, need it)
  std::unique_ptr<vk::Ops> ops_;
  std::unordered_map<const MatMul*, std::unique_ptr<Weight>> weights_;
  std::unordered_map<const float*, std::unique_ptr<vk::Buffer>> vectors_;
  size_t held_bytes_ = 0;
  std::unique_ptr<vk::Buffer> slots_[static_cast<int>(Slot::kCount)];
  std::unique_ptr<vk::Buffer> stats_argmax_, stats_values_;  // logit_stats' results
  std::unique_ptr<vk::Buffer> scores_, ones_;                // attention's scratch; an all-visible key mask
  std::unique_ptr<vk::Buffer> cos_, sin_, key_valid_, query_keep_;  // this forward's, from begin()
  std::vector<std::unique_ptr<vk::Buffer>> retired_;  // replaced while the recording may still read them
  ForwardSetup setup_;
  int64_t rotary_half_ = 0;
  Traffic traffic_;
};

}  // namespace dllm

#endif
