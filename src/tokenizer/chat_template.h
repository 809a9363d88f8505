// Chat templates: the Jinja "chat_template" of a model's tokenizer_config.json rendered like transformers'
// apply_chat_template(messages, tokenize=False) (Jinja subset: see tokenizer/jinja.h).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace dllm {

namespace jinja {
class Template;
}

class ChatTemplate {
 public:
  // A model directory (tokenizer_config.json, else chat_template.jinja) or a tokenizer_config.json file.
  // Throws dllm::Error when there is no template or it uses something unsupported.
  static ChatTemplate load(const std::string& model_dir_or_tokenizer_config_json);
  // From template text; `special_tokens` gives bos_token / eos_token / ... (strings).
  static ChatTemplate from_string(const std::string& source,
                                  const nlohmann::json& special_tokens = nlohmann::json::object(),
                                  const std::string& name = "chat template");

  // messages: [{"role": ..., "content": ...}, ...]. `extra` adds template variables (e.g. "tools",
  // "enable_thinking"); "tools" and "documents" default to none.
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& extra = nlohmann::json::object()) const;

  // The same with JSON that keeps key order (what tojson prints follows it, as in Python).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  nlohmann::json special_tokens_;
  std::shared_ptr<const jinja::Template> tmpl_;
};

}  // namespace dllm
