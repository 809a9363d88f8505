// libFuzzer target: the safetensors header (JSON length, dtypes, shapes, offsets) of a model file. A
// malformed file must end in a dllm::Error, never a crash, a hang or an out-of-bounds read.
#include <cstdint>

#include "fuzz_input.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = dllm::fuzz::write_input(data, size, ".safetensors");
  try {
    dllm::SafetensorsFile file(path);
    size_t bytes = 0;
    for (const auto& [name, t] : file.tensors())
      bytes += static_cast<size_t>(t.numel()) + t.shape_string().size();
    (void)bytes;
  } catch (const std::exception&) {
  }
  return 0;
}
