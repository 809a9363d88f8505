// `dllm devices`: the Vulkan devices this machine has, as the backend sees them (name, type, memory, driver,
// subgroup size, cooperative matrices): what --backend vulkan --device N would run on.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "core/error.h"
#ifdef DLLM_HAVE_VULKAN
#include "vulkan/context.h"
#endif

namespace dllm::cli {
namespace {

void run_devices(bool json) {
#ifdef DLLM_HAVE_VULKAN
  const auto devices = vk::list_devices();
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& d : devices)
      out.push_back({{"index", d.index},
                     {"name", d.name},
                     {"type", d.type},
                     {"driver", d.driver},
                     {"vulkan", d.api_version},
                     {"device_local_bytes", d.device_local_bytes},
                     {"subgroup_size", d.subgroup_size},
                     {"subgroup_arithmetic", d.subgroup_arithmetic},
                     {"cooperative_matrix", d.cooperative_matrix},
                     {"shader_float16", d.shader_float16}});
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  if (devices.empty()) {
    std::printf("no Vulkan device (a GPU driver, or mesa-vulkan-drivers for lavapipe on the CPU, provides one)\n");
    return;
  }
  for (const auto& d : devices)
    std::printf("%d: %s (%s), Vulkan %s, %s; %.1f GiB device-local, subgroup %u%s, cooperative matrix %s, fp16 %s\n",
                d.index, d.name.c_str(), d.type.c_str(), d.api_version.c_str(), d.driver.c_str(),
                static_cast<double>(d.device_local_bytes) / (1u << 30), d.subgroup_size,
                d.subgroup_arithmetic ? " (arithmetic)" : "", d.cooperative_matrix ? "yes" : "no",
                d.shader_float16 ? "yes" : "no");
#else
  (void)json;
  fail("this dllm was built without the Vulkan backend (needs libvulkan-dev and glslc at build time)");
#endif
}

const RegisterCommand kDevices("devices", [](CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("devices", "List the Vulkan devices the GPU backend can run on");
  cmd->add_flag("--json", *json, "One JSON array: index, name, type, driver, memory, subgroup, cooperative matrix");
  cmd->callback([json] { run_devices(*json); });
});

}  // namespace
}  // namespace dllm::cli
