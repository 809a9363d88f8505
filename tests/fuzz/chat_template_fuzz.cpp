// libFuzzer target: the chat-template engine (a Jinja subset). The input is the template source, then a NUL
// byte, then the messages as JSON (the default conversation when that part is missing or not JSON).
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(data, 0, size);
  const size_t split = nul ? static_cast<const uint8_t*>(nul) - data : size;
  const std::string source(text, split);
  nlohmann::json messages = nlohmann::json::array({{{"role", "system"}, {"content", "Be brief."}},
                                                   {{"role", "user"}, {"content", "Hi"}},
                                                   {{"role", "assistant"}, {"content", "Hello."}},
                                                   {{"role", "user"}, {"content", "2+2?"}}});
  if (nul) {
    auto parsed = nlohmann::json::parse(text + split + 1, text + size, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded()) messages = std::move(parsed);
  }
  try {
    const auto tmpl = dllm::ChatTemplate::from_string(source, {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
    (void)tmpl.render(messages, true);
    (void)tmpl.render(messages, false);
  } catch (const std::exception&) {
  }
  return 0;
}
