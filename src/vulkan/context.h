// A Vulkan compute device: the instance, one physical device, its logical device and a compute queue, and
// what the rest of the engine needs to know about it (issue 38's first layer; the backend seam comes above
// it).
//
// Written on the Vulkan loader's C API (Debian libvulkan-dev) directly: the part used is small (buffers, one
// compute pipeline per kernel, one queue), and a wrapper library would add a dependency for little.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dllm::vk {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string type;  // "discrete GPU", "integrated GPU", "CPU" (lavapipe), ...
  bool cpu = false;  // VK_PHYSICAL_DEVICE_TYPE_CPU (lavapipe, SwiftShader): vk::Ops picks its products by it
  std::string driver;  // driver name and info ("llvmpipe", "Mesa 22.3.6 (LLVM 15.0.6)")
  std::string api_version;
  uint64_t device_local_bytes = 0;  // the largest device-local heap
  uint32_t subgroup_size = 0;
  bool subgroup_arithmetic = false;  // subgroupAdd / subgroupMax in compute shaders
  bool subgroup_broadcast = false;   // subgroupBroadcast (the ballot operations) in compute shaders
  bool cooperative_matrix = false;   // VK_KHR_cooperative_matrix (tensor cores)
  bool shader_float16 = false;
};

// Every physical device the loader sees (none: an empty list, no error; a broken loader or driver: an error
// naming the call that failed).
std::vector<DeviceInfo> list_devices();

// Throws (dllm::Error) with the call's name and result when `r` is not VK_SUCCESS.
void check(VkResult r, const char* call);

class Context {
 public:
  // Device `index` of list_devices(); a clear error when there is none or the index is out of range.
  explicit Context(int index = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& info() const { return info_; }
  VkDevice device() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  // Runs `record` into a one-time command buffer, submits it and waits for it.
  template <class F>
  void run(F&& record) {
    VkCommandBuffer cb = begin();
    try {
      record(cb);
    } catch (...) {
      discard(cb);
      throw;
    }
    submit_and_wait(cb);
  }
  // A memory type with `required` flags among `allowed` (vkGetBufferMemoryRequirements' bits), preferring
  // `preferred` too; fails when none.
  uint32_t memory_type(uint32_t allowed, VkMemoryPropertyFlags required,
                       VkMemoryPropertyFlags preferred) const;

  // A one-time command buffer, begun; it ends with exactly one of submit_and_wait (which frees it, also when
  // it throws) or discard (ends and frees it unsubmitted). run() is both in one; vk::Ops records a whole
  // forward.
  VkCommandBuffer begin();
  void submit_and_wait(VkCommandBuffer cb);
  void discard(VkCommandBuffer cb);

 private:
  void release();

  DeviceInfo info_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory_{};
};

}  // namespace dllm::vk
