// A Hugging Face checkpoint directory: config.json, generation_config.json and one or more safetensors shards
// (model.safetensors, or model.safetensors.index.json naming model-0000N-of-0000M.safetensors files).
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace dllm {

class Checkpoint {
 public:
  // Opens and validates every shard; throws dllm::Error naming the file and tensor or field.
  explicit Checkpoint(const std::string& dir);
  // A configuration without tensors (the random models of `dllm bench`: a real config.json, random weights).
  // `label` stands for the directory in messages.
  Checkpoint(std::string label, nlohmann::json config, nlohmann::json generation_config);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  const nlohmann::json& generation_config() const { return generation_config_; }  // {} when absent

  // Returns the tensor and marks it used; the error names the tensor and the expected shape when it is
  // missing or shaped differently.
  const TensorView& take(const std::string& name, const std::vector<int64_t>& expected_shape);
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // The tensor without marking it used, or nullptr.
  const TensorView* find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : it->second;
  }
  // Marks every tensor whose name starts with `prefix` used, unread (parts of a checkpoint the engine does
  // not run: DiffusionGemma's vision tower); returns how many.
  int64_t skip_prefixed(const std::string& prefix);
  // Fails when a tensor was never taken (an extra tensor means the config and the weights disagree).
  void check_all_used() const;

 private:
  std::string dir_;
  nlohmann::json config_;
  nlohmann::json generation_config_ = nlohmann::json::object();
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const TensorView*> tensors_;
  std::set<std::string> used_;
};

}  // namespace dllm
