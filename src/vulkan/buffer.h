// Device memory for tensors: a storage buffer in device-local memory, filled and read through a host-visible
// staging buffer (or mapped directly where device-local memory is host-visible too: lavapipe, integrated
// GPUs, resizable BAR).
#pragma once

#include <cstddef>
#include <span>

#include "vulkan/context.h"

namespace dllm::vk {

class Buffer {
 public:
  // staged: never mapped even where the memory allows it, so that uploads and downloads go through a staging
  // buffer as on a discrete GPU without resizable BAR (how the tests reach that path on lavapipe).
  Buffer(Context& ctx, size_t bytes, bool staged = false);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&&) = delete;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  size_t bytes() const { return bytes_; }
  // Host <-> device copies of data.size() bytes at byte `offset` of the buffer (the range must lie inside
  // it). Synchronous: they are done when they return. While a vk::Ops recording is open, upload only into a
  // buffer the recording does not use yet (it then sees the new values), and download after its submit.
  void upload(std::span<const std::byte> data, size_t offset = 0);
  void download(std::span<std::byte> data, size_t offset = 0) const;

  template <class T>
  void upload(std::span<const T> values, size_t offset = 0) {
    upload(std::as_bytes(values), offset);
  }
  template <class T>
  void download(std::span<T> values, size_t offset = 0) const {
    download(std::as_writable_bytes(values), offset);
  }

 private:
  Context* ctx_;
  size_t bytes_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;  // device-local memory that the host sees: no staging
};

}  // namespace dllm::vk
