// libFuzzer target: a GGUF file (header, metadata, tensor table) and the tokenizer stored in it
// (tokenizer.ggml.* -> tokenizer.json -> the tokenizer, which then encodes and decodes a text).
#include <cstdint>

#include "fuzz_input.h"
#include "io/gguf.h"
#include "io/gguf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = dllm::fuzz::write_input(data, size, ".gguf");
  try {
    dllm::GgufFile file(path);
    for (const auto& t : file.tensors()) (void)file.find_tensor(t.name);
    if (auto tok = dllm::read_gguf_tokenizer(file)) {
      const auto json = dllm::tokenizer_json_from_gguf(*tok, path);
      const auto tokenizer = dllm::Tokenizer::from_json_text(json.dump(), path);
      const auto ids = tokenizer.encode("def f(x):\n    return x + 1  # héllo", true);
      (void)tokenizer.decode(ids, false);
    }
  } catch (const std::exception&) {
  }
  return 0;
}
