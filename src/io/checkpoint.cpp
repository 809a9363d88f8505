#include "io/checkpoint.h"

#include <sys/stat.h>

#include "core/error.h"
#include "io/json_file.h"

namespace dllm {

namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Checkpoint::Checkpoint(std::string label, nlohmann::json config, nlohmann::json generation_config)
    : dir_(std::move(label)), config_(std::move(config)), generation_config_(std::move(generation_config)) {
  if (!config_.is_object()) fail(dir_, "/config.json: must be a JSON object");
  if (!generation_config_.is_object()) fail(dir_, "/generation_config.json: must be a JSON object");
}

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  if (!is_directory(dir)) fail(dir, ": not a directory (expected a Hugging Face model directory)");
  config_ = read_json_file(dir + "/config.json");
  if (!config_.is_object()) fail(dir, "/config.json: must be a JSON object");
  if (file_exists(dir + "/generation_config.json")) {
    generation_config_ = read_json_file(dir + "/generation_config.json");
    if (!generation_config_.is_object()) fail(dir, "/generation_config.json: must be a JSON object");
  }

  const std::string index_path = dir + "/model.safetensors.index.json";
  if (file_exists(index_path)) {
    const auto index = read_json_file(index_path);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      fail(index_path, ": missing object 'weight_map'");
    std::map<std::string, size_t> shard_of_file;
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      if (!it.value().is_string()) fail(index_path, ": weight_map['", it.key(), "'] must be a file name");
      const std::string file = it.value().get<std::string>();
      if (file.find('/') != std::string::npos || file == "..")
        fail(index_path, ": weight_map['", it.key(), "'] names '", file, "' outside the model directory");
      if (!shard_of_file.count(file)) {
        shard_of_file[file] = shards_.size();
        shards_.push_back(std::make_unique<SafetensorsFile>(dir + "/" + file));
      }
      const auto& shard = *shards_[shard_of_file[file]];
      auto found = shard.tensors().find(it.key());
      if (found == shard.tensors().end())
        fail(index_path, ": tensor '", it.key(), "' is mapped to ", file,
             " but that file does not contain it");
      tensors_[it.key()] = &found->second;
    }
    for (const auto& shard : shards_)
      for (const auto& [name, view] : shard->tensors())
        if (!index["weight_map"].contains(name))
          fail(shard->path(), ": tensor '", name, "' is not listed in ", index_path);
        else if (tensors_[name] != &view)
          fail(shard->path(), ": tensor '", name, "' is also in ", tensors_[name]->file, ", which ",
               index_path, " maps it to");
  } else {
    const std::string single = dir + "/model.safetensors";
    if (!file_exists(single)) fail(dir, ": no model.safetensors or model.safetensors.index.json");
    shards_.push_back(std::make_unique<SafetensorsFile>(single));
    for (const auto& [name, view] : shards_[0]->tensors()) tensors_[name] = &view;
  }
}

const TensorView& Checkpoint::take(const std::string& name, const std::vector<int64_t>& expected_shape) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::string files;
    for (const auto& shard : shards_) files += (files.empty() ? "" : ", ") + shard->path();
    if (files.empty()) files = "any safetensors file";
    fail(dir_, ": missing tensor '", name, "' (config.json implies shape ", shape_string(expected_shape),
         "; not in ", files, ")");
  }
  const TensorView& t = *it->second;
  if (t.shape != expected_shape)
    fail(t.file, ": tensor '", name, "' has shape ", t.shape_string(), " but config.json implies ",
         shape_string(expected_shape));
  used_.insert(name);
  return t;
}

int64_t Checkpoint::skip_prefixed(const std::string& prefix) {
  int64_t n = 0;
  for (auto it = tensors_.lower_bound(prefix); it != tensors_.end() && it->first.rfind(prefix, 0) == 0;
       ++it) {
    used_.insert(it->first);
    ++n;
  }
  return n;
}

void Checkpoint::check_all_used() const {
  for (const auto& [name, view] : tensors_)
    if (!used_.count(name))
      fail(view->file, ": unexpected tensor '", name,
           "' (not part of the architecture described by config.json)");
}

}  // namespace dllm
