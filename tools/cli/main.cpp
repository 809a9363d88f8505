// dllm: command-line front end. Each subcommand lives in its own cmd_*.cpp and registers itself.
#include <malloc.h>

#include <algorithm>
#include <cstdio>

#include "command.h"
#include "dllm/error.h"

namespace dllm::cli {

std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

int& exit_status() {
  static int status = 0;
  return status;
}

}  // namespace dllm::cli

int main(int argc, char** argv) {
  using namespace dllm::cli;
  // Every forward returns a fresh logits vector (up to rows x vocab x 4 bytes: 129 MB for 256 rows of LLaDA's
  // 126464-token vocabulary). glibc would map and unmap each one, so every forward paid ~30k page faults: 3%
  // of a LLaDA-8B-shaped forward. Served from the heap and kept there, the pages are reused.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{
      "dllm: run diffusion language models (LLaDA, Dream, LLaDA2, SDAR, LLaDA-MoE, DiffusionGemma) and "
      "autoregressive ones on CPUs and Vulkan GPUs, from local files or the Hugging Face hub"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dllm 0.1.0");
  auto& registry = command_registry();
  std::sort(registry.begin(), registry.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& entry : registry) entry.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dllm: error: %s\n", e.what());
    return 1;
  }
  return exit_status();
}
