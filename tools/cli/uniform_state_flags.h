// The flags of DiffusionGemma's uniform-state sampler (`dllm generate`): each generate() setting by a plain
// flag, --generation-config FILE for a JSON object of them by the reference's names, --random-tape FILE for
// recorded draws and --canvas-ids for the first canvas. docs/diffusion-gemma.md.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dllm/dllm.h"

namespace dllm::cli {

struct UniformStateFlags {
  std::string generation_config, random_tape;
  std::vector<std::string> canvas_ids;  // one per batch row
  std::string eos_ids;                  // comma separated
  UniformStateParams plain;             // the plain flags, over the file's values
};

void add_uniform_state_flags(CLI::App* cmd, UniformStateFlags& flags);
// The file (when given), then the plain flags, into params.uniform_state / tape / canvas_ids. A file's
// decoder_input_ids stand for --canvas-ids when those are not given.
void apply_uniform_state_flags(const UniformStateFlags& flags, GenerateParams& params);
// Whether any of them was given (they apply only to a model with a canvas decoder).
bool uniform_state_flags_given(const UniformStateFlags& flags);

}  // namespace dllm::cli
