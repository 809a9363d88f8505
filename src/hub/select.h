// Which files of a repository the engine needs: a Hugging Face checkpoint directory's config, generation
// config, tokenizer and chat template and its safetensors (the shards its index names), or the one GGUF file
// a
// `:quant` / `:file` picks, as llama.cpp's `-hf org/name:Q4_K_M` does.
#pragma once

#include <string>
#include <vector>

#include "hub/hub_ref.h"

namespace dllm::hub {

struct Selection {
  std::vector<std::string> files;  // to have in the snapshot (the shards come after the index is read)
  std::string gguf;                // the .gguf file the model is, or "" for a checkpoint directory
  std::string index;               // model.safetensors.index.json when the weights are sharded
};

// From the repository's file list; an error names the repository and lists the .gguf files when the choice is
// missing, matches nothing or matches several.
Selection select_files(const std::vector<std::string>& repo_files, const HubRef& ref);

// The shard files a model.safetensors.index.json names (its weight_map's values), sorted, each once.
std::vector<std::string> shards_in_index(const std::string& index_path);

}  // namespace dllm::hub
