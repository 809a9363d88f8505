#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#if DLLM_HAVE_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#endif

namespace dllm {

const char* backend_name(BackendKind kind) {
  return kind == BackendKind::kCpu ? "cpu" : "vulkan";
}

bool vulkan_built() {
#if DLLM_HAVE_VULKAN
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(BackendKind kind, int device) {
  if (kind == BackendKind::kCpu) return std::make_unique<CpuBackend>();
#if DLLM_HAVE_VULKAN
  return std::make_unique<VulkanBackend>(device);
#else
  (void)device;
  fail(
      "--backend vulkan: this build has no Vulkan backend (it needs libvulkan-dev and glslc at build time: "
      "apt-get install libvulkan-dev glslc mesa-vulkan-drivers, then configure again)");
#endif
}

}  // namespace dllm
