// libFuzzer target: config.json, through every family's parser (the loader and `dllm convert` both call it).
// The input is the JSON text; anything that is not JSON is refused before the families see it.
#include <cstdint>
#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "model/family.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto config = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return 0;
  try {
    const dllm::Checkpoint ckpt("fuzz", config, nlohmann::json::object());
    for (const dllm::Family* family : dllm::families()) {
      try {
        (void)family->parse_hf_config(ckpt);
      } catch (const std::exception&) {
      }
    }
  } catch (const std::exception&) {
  }
  return 0;
}
