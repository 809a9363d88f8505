// DiffusionGemma's tensors by their Hugging Face names and by the names `dllm convert` gives them in GGUF
// (llama.cpp's naming style: blk.N.attn_q.weight, ...; docs/gguf.md "DiffusionGemma" says how this layout
// relates to llama.cpp's open pull requests). One table, so that the converter and the loader cannot drift.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dllm {

// HF name -> GGUF name for every text tensor of a model of `layers` layers (the vision tower is not written).
std::map<std::string, std::string> diffusion_gemma_gguf_names(int64_t layers);

struct DiffusionGemmaConfig;
// Every text tensor's HF name and shape (PyTorch order) under `config`, in GGUF file order: the whole-model
// tensors, then layer by layer (no v_proj on full layers).
std::vector<std::pair<std::string, std::vector<int64_t>>> diffusion_gemma_tensor_shapes(
    const DiffusionGemmaConfig& config);

// GGUF metadata keys: the checkpoint's config.json and generation_config.json as JSON text, so that a file
// is read by the same config parser as the directory it was converted from.
inline constexpr const char* kDiffusionGemmaConfigKey = "diffusion-gemma.hf_config_json";
inline constexpr const char* kDiffusionGemmaGenerationKey = "diffusion-gemma.hf_generation_config_json";
inline constexpr const char* kDiffusionGemmaArchitecture = "diffusion-gemma";  // general.architecture

}  // namespace dllm
