// Device memory for tensors: a storage buffer in device-local memory, filled and read through a host-visible
// staging buffer (or mapped directly where device-local memory is host-visible too: lavapipe, integrated GPUs,
// resizable BAR).
#pragma once

#include <cstddef>
#include <span>

#include "vulkan/context.h"

namespace dllm::vk {

class Buffer {
 public:
  Buffer(Context& ctx, size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&&) = delete;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  size_t bytes() const { return bytes_; }
  // Host <-> device copies of the first `data.size()` bytes (at most bytes()).
  void upload(std::span<const std::byte> data);
  void download(std::span<std::byte> data) const;

  template <class T>
  void upload(std::span<const T> values) {
    upload(std::as_bytes(values));
  }
  template <class T>
  void download(std::span<T> values) const {
    download(std::as_writable_bytes(values));
  }

 private:
  Context* ctx_;
  size_t bytes_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;  // device-local memory that the host sees: no staging
};

}  // namespace dllm::vk
