#include "model/registry.h"

#include <omp.h>

#include "core/error.h"
#include "io/gguf.h"
#include "io/json_file.h"

namespace dllm {

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> kArchitectures = {
      {"llada", {"LLaDAModelLM"}, {"llada"}, &load_llada},
      {"dream", {"DreamModel"}, {"Dream", "dream"}, &load_dream},
  };
  return kArchitectures;
}

const Architecture& find_architecture(const Checkpoint& checkpoint) {
  const auto& cfg = checkpoint.config();
  std::string seen;
  if (cfg.contains("architectures") && cfg["architectures"].is_array()) {
    for (const auto& a : cfg["architectures"]) {
      if (!a.is_string()) continue;
      seen += (seen.empty() ? "" : ", ") + a.get<std::string>();
      for (const auto& arch : architectures())
        for (const auto& name : arch.hf_architectures)
          if (name == a.get<std::string>()) return arch;
    }
  }
  if (cfg.contains("model_type") && cfg["model_type"].is_string()) {
    const std::string type = cfg["model_type"].get<std::string>();
    seen += (seen.empty() ? "model_type " : ", model_type ") + type;
    for (const auto& arch : architectures())
      for (const auto& name : arch.model_types)
        if (name == type) return arch;
  }
  std::string supported;
  for (const auto& arch : architectures()) supported += (supported.empty() ? "" : ", ") + arch.name;
  fail(checkpoint.dir(), "/config.json: unsupported architecture (",
       seen.empty() ? "no 'architectures' or 'model_type' field" : seen, "); supported: ", supported);
}

std::optional<int64_t> find_added_token(const std::string& model_dir, const std::vector<std::string>& contents) {
  const std::string path = model_dir + "/tokenizer.json";
  if (!file_exists(path)) return std::nullopt;
  const auto tok = read_json_file(path);
  if (!tok.is_object() || !tok.contains("added_tokens") || !tok["added_tokens"].is_array()) return std::nullopt;
  for (const auto& want : contents)
    for (const auto& t : tok["added_tokens"])
      if (t.is_object() && t.value("content", "") == want && t.contains("id") && t["id"].is_number_integer())
        return t["id"].get<int64_t>();
  return std::nullopt;
}

std::shared_ptr<Model> load_gguf(const std::string& path, const LoadOptions& options);  // gguf_loader.cpp

Expected<std::shared_ptr<Model>> Model::load(const std::string& path, const LoadOptions& options) {
  return capture([&]() -> std::shared_ptr<Model> {
    if (options.threads > 0) omp_set_num_threads(options.threads);
    if (is_gguf_file(path)) return load_gguf(path, options);
    if (options.weights == WeightFormat::kQ8)
      fail(path, ": 8-bit weights (WeightFormat::kQ8, --weights q8) need a GGUF file; convert the directory first: "
                 "dllm convert -m DIR -o model-q8_0.gguf --type q8_0");
    auto checkpoint = std::make_unique<Checkpoint>(path);
    const Architecture& arch = find_architecture(*checkpoint);
    return arch.load(std::move(checkpoint), options);
  });
}

}  // namespace dllm
