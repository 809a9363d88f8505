// The families this engine runs. Adding one: its file under model/families/ (config parsing and tensor table,
// see family.h) and one line here; the HF and GGUF loaders, `dllm convert`, `dllm bench`'s random models and
// the parameter count follow from the table.
#include "core/error.h"
#include "model/family.h"

namespace dllm {

const Family& llada_family();      // families/llada.cpp
const Family& dream_family();      // families/dream.cpp
const Family& llada2_family();     // families/llada2.cpp
const Family& sdar_family();       // families/sdar.cpp
const Family& llada_moe_family();  // families/llada_moe.cpp
const Family& qwen2_family();      // families/qwen2.cpp (autoregressive)
const Family& qwen3_family();      // families/qwen3.cpp (autoregressive)
const Family& llama_family();      // families/llama.cpp (autoregressive)

const std::vector<const Family*>& families() {
  static const std::vector<const Family*> kFamilies = {
      &llada_family(),     &dream_family(), &llada2_family(), &sdar_family(),
      &llada_moe_family(), &qwen2_family(), &qwen3_family(),  &llama_family(),
  };
  return kFamilies;
}

const Family* find_family(const std::string& name) {
  for (const Family* f : families())
    if (f->name == name) return f;
  return nullptr;
}

std::string family_names() {
  std::string names;
  for (const Family* f : families()) names += (names.empty() ? "" : ", ") + f->name;
  return names;
}

const Family& find_family(const Checkpoint& checkpoint) {
  const auto& cfg = checkpoint.config();
  std::string seen;
  if (cfg.contains("architectures") && cfg["architectures"].is_array()) {
    for (const auto& a : cfg["architectures"]) {
      if (!a.is_string()) continue;
      seen += (seen.empty() ? "" : ", ") + a.get<std::string>();
      for (const Family* f : families())
        for (const auto& name : f->hf_architectures)
          if (name == a.get<std::string>()) return *f;
    }
  }
  if (cfg.contains("model_type") && cfg["model_type"].is_string()) {
    const std::string type = cfg["model_type"].get<std::string>();
    seen += (seen.empty() ? "model_type " : ", model_type ") + type;
    for (const Family* f : families())
      for (const auto& name : f->model_types)
        if (name == type) return *f;
  }
  fail(checkpoint.dir(), "/config.json: unsupported architecture (",
       seen.empty() ? "no 'architectures' or 'model_type' field" : seen, "); supported: ", family_names());
}

}  // namespace dllm
