#include "vulkan/kernel.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace dllm::vk {

void barrier_after(VkCommandBuffer cb, VkPipelineStageFlags src_stage, VkAccessFlags src_access) {
  // Read-after-write and write-after-write on the device, and the host's reads after the fence.
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = src_access;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                          VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(
      cb, src_stage,
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0,
      1, &barrier, 0, nullptr, 0, nullptr);
}

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

  add_pool();
}

Kernel::~Kernel() {
  VkDevice d = ctx_->device();
  for (const Pool& pool : pools_) vkDestroyDescriptorPool(d, pool.handle, nullptr);
  if (pipeline_) vkDestroyPipeline(d, pipeline_, nullptr);
  if (layout_) vkDestroyPipelineLayout(d, layout_, nullptr);
  if (set_layout_) vkDestroyDescriptorSetLayout(d, set_layout_, nullptr);
  if (module_) vkDestroyShaderModule(d, module_, nullptr);
}

// A forward records hundreds of dispatches of one kernel before its submit, each holding a set until then.
// The kernel grows rather than resets: a new pool (twice the last one's sets, up to 1024) when every pool is
// full, and sets freed one by one (FREE_DESCRIPTOR_SET) by whoever recorded them once their command buffer
// ran. Resetting whole pools after a submit would be cheaper per set, but a Kernel does not know who else
// holds sets (Kernel::run, a recording still open): the owner of each set frees it. The pools a first forward
// grows stay and serve the later ones, so a steady state creates none.
void Kernel::add_pool() {
  const uint32_t sets = pools_.empty() ? 64 : std::min(2 * pools_.back().capacity, 1024u);
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, sets * buffers_};
  VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pi.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
  pi.maxSets = sets;
  pi.poolSizeCount = 1;
  pi.pPoolSizes = &size;
  Pool pool;
  pool.capacity = sets;
  check(vkCreateDescriptorPool(ctx_->device(), &pi, nullptr, &pool.handle), name_);
  pools_.push_back(pool);
}

bool Kernel::allocate_from(size_t pool, Set& out) {
  Pool& p = pools_[pool];
  if (p.live == p.capacity) return false;
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = p.handle;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &set_layout_;
  VkDescriptorSet set = VK_NULL_HANDLE;
  const VkResult r = vkAllocateDescriptorSets(ctx_->device(), &ai, &set);
  if (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL) return false;
  check(r, name_);
  ++p.live;
  out = {p.handle, set};
  return true;
}

Kernel::Set Kernel::allocate() {
  // The pools in turn from the one that served last, passing full ones (by count, or by the driver's word);
  // when all are full, a new one.
  Set set;
  for (size_t i = 0; i < pools_.size(); ++i) {
    const size_t at = (current_ + i) % pools_.size();
    if (allocate_from(at, set)) {
      current_ = at;
      return set;
    }
  }
  add_pool();
  current_ = pools_.size() - 1;
  if (!allocate_from(current_, set)) fail("Vulkan kernel ", name_, ": a new descriptor pool gives no set");
  return set;
}

Kernel::Set Kernel::record(VkCommandBuffer cb, std::initializer_list<const Buffer*> buffers, const void* push,
                           uint32_t groups_x, uint32_t groups_y, uint32_t groups_z) {
  if (buffers.size() != buffers_)
    fail("Vulkan kernel ", name_, ": ", buffers.size(), " buffers, expects ", buffers_);
  const Set set = allocate();
  std::vector<VkDescriptorBufferInfo> infos;
  infos.reserve(buffers_);
  for (const Buffer* b : buffers) infos.push_back({b->handle(), 0, VK_WHOLE_SIZE});
  std::vector<VkWriteDescriptorSet> writes(buffers_);
  for (uint32_t i = 0; i < buffers_; ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set.set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(ctx_->device(), buffers_, writes.data(), 0, nullptr);
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout_, 0, 1, &set.set, 0, nullptr);
  if (push_bytes_) vkCmdPushConstants(cb, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes_, push);
  vkCmdDispatch(cb, groups_x, groups_y, groups_z);
  barrier_after(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT);
  return set;
}

void Kernel::free_set(Set set) {
  for (Pool& pool : pools_)
    if (pool.handle == set.pool) {
      vkFreeDescriptorSets(ctx_->device(), pool.handle, 1, &set.set);
      --pool.live;
      return;
    }
}

void Kernel::run(std::initializer_list<const Buffer*> buffers, const void* push, uint32_t groups_x,
                 uint32_t groups_y, uint32_t groups_z) {
  Set set;
  try {
    ctx_->run([&](VkCommandBuffer cb) { set = record(cb, buffers, push, groups_x, groups_y, groups_z); });
  } catch (...) {
    if (set.set) free_set(set);
    throw;
  }
  free_set(set);
}

}  // namespace dllm::vk
