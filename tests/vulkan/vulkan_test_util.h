// What the Vulkan tests share: skipping without a device (a failure under DLLM_REQUIRE_VULKAN=1, which
// scripts/test.sh sets: CI must not pass by skipping them), random values, and buffers to and from the host.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "test_util.h"
#include "vulkan/buffer.h"
#include "vulkan/context.h"
#include "vulkan/ops.h"

namespace dllm::vk::test_util {

inline bool have_device() {
  if (!list_devices().empty()) return true;
  const char* required = std::getenv("DLLM_REQUIRE_VULKAN");
  if (required && std::string(required) == "1")
    ADD_FAILURE()
        << "DLLM_REQUIRE_VULKAN=1 but the Vulkan loader sees no device (mesa-vulkan-drivers missing?)";
  return false;
}

#define NEED_DEVICE()                        \
  if (!::dllm::vk::test_util::have_device()) \
  GTEST_SKIP() << "no Vulkan device (apt-get install mesa-vulkan-drivers: lavapipe runs Vulkan on the CPU)"

// The products' two variants (vk::MatmulVariant), which every product test runs: Ops(ctx) takes only one of
// them on a given device (registers on lavapipe, tiled on GPUs).
inline constexpr MatmulVariant kMatmulVariants[] = {MatmulVariant::kTiled, MatmulVariant::kRegisters};

// n normal values of standard deviation `scale` (test::randn, the kernel tests' generator).
inline std::vector<float> random_values(size_t n, float scale, uint32_t seed) {
  return test::randn(n, seed, scale);
}

template <class T>
Buffer device_copy(Context& ctx, const std::vector<T>& v) {
  Buffer b(ctx, v.size() * sizeof(T));
  b.upload(std::span<const T>(v));
  return b;
}

template <class T = float>
std::vector<T> download(const Buffer& b, size_t n) {
  std::vector<T> v(n);
  b.download(std::span<T>(v));
  return v;
}

}  // namespace dllm::vk::test_util
