// Architecture registry: config.json's `architectures` / `model_type` -> the loader of that family.
// A new family is one file (its loader) plus one line in registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dllm/dllm.h"
#include "io/checkpoint.h"

namespace dllm {

using ArchitectureLoader = std::shared_ptr<Model> (*)(std::unique_ptr<Checkpoint> checkpoint,
                                                      const LoadOptions& options);

struct Architecture {
  std::string name;                            // "llada"
  std::vector<std::string> hf_architectures;  // config.json "architectures" entries
  std::vector<std::string> model_types;       // config.json "model_type" values
  ArchitectureLoader load;
};

const std::vector<Architecture>& architectures();
// Picks the family of a checkpoint; the error lists what config.json said and what is supported.
const Architecture& find_architecture(const Checkpoint& checkpoint);

// Loaders, one per family file.
std::shared_ptr<Model> load_llada(std::unique_ptr<Checkpoint> checkpoint, const LoadOptions& options);
std::shared_ptr<Model> load_dream(std::unique_ptr<Checkpoint> checkpoint, const LoadOptions& options);

// Special-token ids not in config.json, looked up by content in the directory's tokenizer.json added_tokens.
std::optional<int64_t> find_added_token(const std::string& model_dir, const std::vector<std::string>& contents);

}  // namespace dllm
