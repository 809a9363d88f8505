// libFuzzer target: tokenizer.json (model, normalizer, pre-tokenizer, added tokens, post-processor, decoder),
// then an encode and a decode with the tokenizer it builds.
#include <cstdint>
#include <string_view>

#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto tokenizer =
        dllm::Tokenizer::from_json_text(std::string_view(reinterpret_cast<const char*>(data), size));
    const auto ids = tokenizer.encode("Hello, wörld! 123 <|mask|>\n\tdef f(): pass", true);
    (void)tokenizer.decode(ids, false);
    (void)tokenizer.decode(ids, true);
  } catch (const std::exception&) {
  }
  return 0;
}
