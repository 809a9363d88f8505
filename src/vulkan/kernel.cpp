#include "vulkan/kernel.h"

#include <vector>

#include "core/error.h"

namespace dllm::vk {

Kernel::Kernel(Context& ctx, std::span<const uint32_t> spirv, uint32_t buffers, uint32_t push_bytes,
               const char* name)
    : ctx_(&ctx), name_(name), buffers_(buffers), push_bytes_(push_bytes) {
  VkDevice d = ctx.device();
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = spirv.size_bytes();
  mi.pCode = spirv.data();
  check(vkCreateShaderModule(d, &mi, nullptr, &module_), name);

  std::vector<VkDescriptorSetLayoutBinding> bindings(buffers);
  for (uint32_t i = 0; i < buffers; ++i)
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = buffers;
  li.pBindings = bindings.data();
  check(vkCreateDescriptorSetLayout(d, &li, nullptr, &set_layout_), name);

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &set_layout_;
  pli.pushConstantRangeCount = push_bytes ? 1 : 0;
  pli.pPushConstantRanges = push_bytes ? &range : nullptr;
  check(vkCreatePipelineLayout(d, &pli, nullptr, &layout_), name);

  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module_;
  ci.stage.pName = "main";
  ci.layout = layout_;
  check(vkCreateComputePipelines(d, VK_NULL_HANDLE, 1, &ci, nullptr, &pipeline_), name);

  // Sets are freed one by one after their command buffer ran: 64 in flight is ample for one queue.
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 64 * buffers};
  VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pi.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
  pi.maxSets = 64;
  pi.poolSizeCount = 1;
  pi.pPoolSizes = &size;
  check(vkCreateDescriptorPool(d, &pi, nullptr, &pool_), name);
}

Kernel::~Kernel() {
  VkDevice d = ctx_->device();
  if (pool_) vkDestroyDescriptorPool(d, pool_, nullptr);
  if (pipeline_) vkDestroyPipeline(d, pipeline_, nullptr);
  if (layout_) vkDestroyPipelineLayout(d, layout_, nullptr);
  if (set_layout_) vkDestroyDescriptorSetLayout(d, set_layout_, nullptr);
  if (module_) vkDestroyShaderModule(d, module_, nullptr);
}

VkDescriptorSet Kernel::record(VkCommandBuffer cb, std::initializer_list<const Buffer*> buffers, const void* push,
                               uint32_t groups_x, uint32_t groups_y, uint32_t groups_z) {
  if (buffers.size() != buffers_) fail("Vulkan kernel ", name_, ": ", buffers.size(), " buffers, expects ", buffers_);
  VkDevice d = ctx_->device();
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = pool_;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &set_layout_;
  VkDescriptorSet set = VK_NULL_HANDLE;
  check(vkAllocateDescriptorSets(d, &ai, &set), name_);
  std::vector<VkDescriptorBufferInfo> infos;
  infos.reserve(buffers_);
  for (const Buffer* b : buffers) infos.push_back({b->handle(), 0, VK_WHOLE_SIZE});
  std::vector<VkWriteDescriptorSet> writes(buffers_);
  for (uint32_t i = 0; i < buffers_; ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(d, buffers_, writes.data(), 0, nullptr);
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout_, 0, 1, &set, 0, nullptr);
  if (push_bytes_) vkCmdPushConstants(cb, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes_, push);
  vkCmdDispatch(cb, groups_x, groups_y, groups_z);
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                          VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                           VK_PIPELINE_STAGE_HOST_BIT,
                       0, 1, &barrier, 0, nullptr, 0, nullptr);
  return set;
}

void Kernel::free_set(VkDescriptorSet set) { vkFreeDescriptorSets(ctx_->device(), pool_, 1, &set); }

void Kernel::run(std::initializer_list<const Buffer*> buffers, const void* push, uint32_t groups_x,
                 uint32_t groups_y, uint32_t groups_z) {
  VkDescriptorSet set = VK_NULL_HANDLE;
  try {
    ctx_->run([&](VkCommandBuffer cb) { set = record(cb, buffers, push, groups_x, groups_y, groups_z); });
  } catch (...) {
    if (set) free_set(set);
    throw;
  }
  free_set(set);
}

}  // namespace dllm::vk
