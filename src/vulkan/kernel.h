// One compute shader as a pipeline: SPIR-V compiled by glslc at build time and embedded (src/vulkan/shaders,
// cmake/spirv_to_header.cmake), a fixed number of storage buffers (bindings 0..n-1) and push constants.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>

#include "vulkan/buffer.h"
#include "vulkan/context.h"

namespace dllm::vk {

class Kernel {
 public:
  Kernel(Context& ctx, std::span<const uint32_t> spirv, uint32_t buffers, uint32_t push_bytes, const char* name);
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  // Records the dispatch (buffers bound in order, push constants) and a barrier after it, so that the next
  // dispatch or copy in the same command buffer sees its writes. `set` must stay alive until the command buffer
  // has run: the caller frees it (free_set) afterwards.
  VkDescriptorSet record(VkCommandBuffer cb, std::initializer_list<const Buffer*> buffers, const void* push,
                         uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1);
  void free_set(VkDescriptorSet set);
  // record() in its own command buffer, run and waited for.
  void run(std::initializer_list<const Buffer*> buffers, const void* push, uint32_t groups_x,
           uint32_t groups_y = 1, uint32_t groups_z = 1);

 private:
  Context* ctx_;
  const char* name_;
  uint32_t buffers_, push_bytes_;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
};

}  // namespace dllm::vk
