// The denoising-strategy flags that `dllm generate`, `infill` and `serve` share: the strategy axes, whose
// words come from one table (src/denoise/strategy_names.h: the flags unmask / alg / remasking, schedule and
// cache), Fast-dLLM's threshold / factor, and Dream's alg-temp / eps / top-k / top-p. docs/denoising.md.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <string>

#include "dllm/dllm.h"

namespace dllm::cli {

struct DenoiseFlags {
  std::map<std::string, std::optional<std::string>>
      words;  // flag name without dashes -> the word, when given
  std::optional<double> threshold, factor;
  std::optional<std::string> block_loop, stop_ids;  // block-diffusion loops
};

// Registers the flags; plain numeric ones write straight into params.
void add_denoise_flags(CLI::App* cmd, GenerateParams& params, DenoiseFlags& flags);
// Resolves the words and rules into params; the error names the flag and lists the accepted words.
// The schedule of commands that denoise masked spans of a given text (infill, rewrite): --block-length,
// --steps,
// --temperature, --seed over the masked positions, then the denoise flags above.
void add_masked_span_flags(CLI::App* cmd, GenerateParams& params, DenoiseFlags& flags);

void apply_denoise_flags(const DenoiseFlags& flags, GenerateParams& params);

}  // namespace dllm::cli
