#include "vulkan/buffer.h"

#include <cstring>

#include "core/error.h"

namespace dllm::vk {

namespace {

struct Raw {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkMemoryPropertyFlags flags = 0;
};

Raw allocate(Context& ctx, size_t bytes, VkBufferUsageFlags usage, VkMemoryPropertyFlags required,
             VkMemoryPropertyFlags preferred) {
  Raw r;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = bytes;
  bi.usage = usage;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(ctx.device(), &bi, nullptr, &r.buffer), "vkCreateBuffer");
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(ctx.device(), r.buffer, &req);
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  try {
    ai.memoryTypeIndex = ctx.memory_type(req.memoryTypeBits, required, preferred);
    check(vkAllocateMemory(ctx.device(), &ai, nullptr, &r.memory), "vkAllocateMemory");
  } catch (...) {
    vkDestroyBuffer(ctx.device(), r.buffer, nullptr);
    throw;
  }
  VkPhysicalDeviceMemoryProperties mem{};
  vkGetPhysicalDeviceMemoryProperties(ctx.physical(), &mem);
  r.flags = mem.memoryTypes[ai.memoryTypeIndex].propertyFlags;
  vkBindBufferMemory(ctx.device(), r.buffer, r.memory, 0);
  return r;
}

void free_raw(Context& ctx, Raw& r) {
  if (r.buffer) vkDestroyBuffer(ctx.device(), r.buffer, nullptr);
  if (r.memory) vkFreeMemory(ctx.device(), r.memory, nullptr);
  r = Raw{};
}

constexpr VkMemoryPropertyFlags kHost =
    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;

}  // namespace

Buffer::Buffer(Context& ctx, size_t bytes, bool staged) : ctx_(&ctx), bytes_(bytes) {
  if (bytes == 0) fail("Vulkan: a buffer of 0 bytes");
  if (bytes > ctx.info().device_local_bytes)
    fail("Vulkan: ", bytes, " bytes do not fit device '", ctx.info().name, "' (",
         ctx.info().device_local_bytes, " bytes of device-local memory)");
  Raw r = allocate(ctx, bytes,
                   VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                       VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                   VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, kHost);
  buffer_ = r.buffer;
  memory_ = r.memory;
  if (!staged && (r.flags & kHost) == kHost)
    check(vkMapMemory(ctx.device(), memory_, 0, VK_WHOLE_SIZE, 0, &mapped_), "vkMapMemory");
}

Buffer::Buffer(Buffer&& o) noexcept
    : ctx_(o.ctx_), bytes_(o.bytes_), buffer_(o.buffer_), memory_(o.memory_), mapped_(o.mapped_) {
  o.buffer_ = VK_NULL_HANDLE;
  o.memory_ = VK_NULL_HANDLE;
  o.mapped_ = nullptr;
}

Buffer::~Buffer() {
  if (mapped_) vkUnmapMemory(ctx_->device(), memory_);
  Raw r{buffer_, memory_, 0};
  free_raw(*ctx_, r);
}

void Buffer::upload(std::span<const std::byte> data, size_t offset) {
  if (offset > bytes_ || data.size() > bytes_ - offset)
    fail("Vulkan: upload of ", data.size(), " bytes at ", offset, " into a buffer of ", bytes_);
  if (data.empty()) return;
  if (mapped_) {
    std::memcpy(static_cast<std::byte*>(mapped_) + offset, data.data(), data.size());
    return;
  }
  Raw staging = allocate(*ctx_, data.size(), VK_BUFFER_USAGE_TRANSFER_SRC_BIT, kHost, 0);
  void* p = nullptr;
  try {
    check(vkMapMemory(ctx_->device(), staging.memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    std::memcpy(p, data.data(), data.size());
    vkUnmapMemory(ctx_->device(), staging.memory);
    ctx_->run([&](VkCommandBuffer cb) {
      VkBufferCopy copy{0, offset, data.size()};
      vkCmdCopyBuffer(cb, staging.buffer, buffer_, 1, &copy);
    });
  } catch (...) {
    free_raw(*ctx_, staging);
    throw;
  }
  free_raw(*ctx_, staging);
}

void Buffer::download(std::span<std::byte> data, size_t offset) const {
  if (offset > bytes_ || data.size() > bytes_ - offset)
    fail("Vulkan: download of ", data.size(), " bytes at ", offset, " from a buffer of ", bytes_);
  if (data.empty()) return;
  if (mapped_) {
    std::memcpy(data.data(), static_cast<const std::byte*>(mapped_) + offset, data.size());
    return;
  }
  Raw staging = allocate(*ctx_, data.size(), VK_BUFFER_USAGE_TRANSFER_DST_BIT, kHost, 0);
  try {
    ctx_->run([&](VkCommandBuffer cb) {
      VkBufferCopy copy{offset, 0, data.size()};
      vkCmdCopyBuffer(cb, buffer_, staging.buffer, 1, &copy);
    });
    void* p = nullptr;
    check(vkMapMemory(ctx_->device(), staging.memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    std::memcpy(data.data(), p, data.size());
    vkUnmapMemory(ctx_->device(), staging.memory);
  } catch (...) {
    free_raw(*ctx_, staging);
    throw;
  }
  free_raw(*ctx_, staging);
}

}  // namespace dllm::vk
