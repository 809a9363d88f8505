// GGUF files of a model shape with random weights, for benchmarks at real sizes that are not on disk: written
// block by block (random quants under fixed scales, no f32 copy of the model), then loaded by the ordinary
// loader, memory-mapped as a downloaded file would be (`dllm bench --shape diffusion-gemma-26b-a4b`).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "convert/gguf_convert.h"

namespace dllm {

// DiffusionGemma: `config` is a config.json (its text_config.num_hidden_layers may be cut by the caller);
// matrices in `type` (f32, bf16, q8_0, q4_k; q4_k falls back to q4_0 where rows are not whole blocks, as
// `dllm convert` does: the experts' down projections of 704 columns),
// vectors F32 (norms 1). The released generation_config.json goes beside it in the metadata.
ConvertResult write_random_diffusion_gemma_gguf(
    const nlohmann::json& config, GgmlType type, const std::string& path, uint64_t seed,
    const std::function<void(const ConvertProgress&)>& progress = {});

}  // namespace dllm
