// The denoising-strategy flags `dllm generate` (and other commands) share: Dream's --alg/--alg-temp/--eps/--top-k/
// --top-p, the axes --unmask/--schedule, Fast-dLLM's --threshold/--factor and --cache. docs/denoising.md.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "dllm/dllm.h"

namespace dllm::cli {

struct DenoiseFlags {
  std::string alg;       // Dream: origin | maskgit_plus | topk_margin | entropy
  std::string unmask;    // confidence | margin | entropy | random
  std::string schedule;  // uniform | timestep
  std::optional<double> threshold, factor;
  std::string cache = "none";
};

// Registers the flags; plain numeric ones write straight into params.
void add_denoise_flags(CLI::App* cmd, GenerateParams& params, DenoiseFlags& flags);
// Resolves the string flags into params; the error names the flag and the bad value.
void apply_denoise_flags(const DenoiseFlags& flags, GenerateParams& params);

}  // namespace dllm::cli
