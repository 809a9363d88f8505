// One compute shader as a pipeline: SPIR-V compiled by glslc at build time and embedded (src/vulkan/shaders,
// cmake/spirv_to_header.cmake), a fixed number of storage buffers (bindings 0..n-1) and push constants.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "vulkan/buffer.h"
#include "vulkan/context.h"

namespace dllm::vk {

// A barrier after a command whose writes (src_access at src_stage) the commands recorded after it read or
// overwrite: in shaders, in copies, or from the host after the wait.
void barrier_after(VkCommandBuffer cb, VkPipelineStageFlags src_stage, VkAccessFlags src_access);

class Kernel {
 public:
  // A descriptor set and the pool it came from: what free_set takes back.
  struct Set {
    VkDescriptorPool pool = VK_NULL_HANDLE;
    VkDescriptorSet set = VK_NULL_HANDLE;
  };

  Kernel(Context& ctx, std::span<const uint32_t> spirv, uint32_t buffers, uint32_t push_bytes,
         const char* name);
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  // Records the dispatch (buffers bound in order, push constants) and a barrier after it, so that the next
  // dispatch or copy in the same command buffer sees its writes. The set must stay alive until the command
  // buffer has run (or is discarded): the caller frees it (free_set) afterwards. Any number of sets may be
  // live at once: the kernel adds descriptor pools as it needs them.
  Set record(VkCommandBuffer cb, std::initializer_list<const Buffer*> buffers, const void* push,
             uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1);
  void free_set(Set set);
  // record() in its own command buffer, run and waited for.
  void run(std::initializer_list<const Buffer*> buffers, const void* push, uint32_t groups_x,
           uint32_t groups_y = 1, uint32_t groups_z = 1);
  // How many descriptor pools the kernel holds (1 until more sets were live at once than the first one
  // holds).
  size_t pools() const { return pools_.size(); }

 private:
  struct Pool {
    VkDescriptorPool handle = VK_NULL_HANDLE;
    uint32_t capacity = 0, live = 0;
  };
  void add_pool();
  bool allocate_from(size_t pool, Set& out);  // false: that pool is full
  Set allocate();

  Context* ctx_;
  const char* name_;
  uint32_t buffers_, push_bytes_;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  std::vector<Pool> pools_;
  size_t current_ = 0;  // the pool tried first
};

}  // namespace dllm::vk
