#include "tokenizer/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/file.h"
#include "tokenizer/jinja.h"
#include "tokenizer/json_path.h"

namespace dllm {

ChatTemplate ChatTemplate::from_string(const std::string& source, const nlohmann::json& special_tokens,
                                       const std::string& name) {
  ChatTemplate t;
  t.source_ = source;
  t.special_tokens_ = special_tokens;
  t.tmpl_ = std::make_shared<jinja::Template>(source, name);
  return t;
}

ChatTemplate ChatTemplate::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::string config_path = path;
  std::string jinja_path;
  if (fs::is_directory(path)) {
    config_path = (fs::path(path) / "tokenizer_config.json").string();
    jinja_path = (fs::path(path) / "chat_template.jinja").string();
  }
  nlohmann::json special = nlohmann::json::object();
  std::string source;
  std::string where;
  if (fs::exists(config_path)) {
    nlohmann::json cfg;
    try {
      cfg = nlohmann::json::parse(read_whole_file(config_path));
    } catch (const nlohmann::json::parse_error& e) {
      fail(config_path, ": invalid JSON: ", e.what());
    }
    tok::JNode root(cfg, config_path);
    root.expect_object();
    for (const char* key :
         {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"}) {
      auto n = root.opt(key);
      if (!n) continue;
      if (n->json().is_string()) {
        special[key] = n->str();
      } else if (n->json().is_object()) {
        special[key] = (*n)["content"].str();  // AddedToken form {"content": "<s>", ...}
      } else {
        n->fail("expected a string or {\"content\": ...}, got ", n->type_name());
      }
    }
    if (auto ct = root.opt("chat_template")) {
      where = config_path + ": " + ct->path();
      if (ct->json().is_string()) {
        source = ct->str();
      } else if (ct->json().is_array()) {
        // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
        for (size_t i = 0; i < ct->size(); ++i) {
          tok::JNode item = ct->at(i);
          if (item["name"].str() == "default") {
            source = item["template"].str();
            where = config_path + ": " + item.path() + ".template";
          }
        }
        if (source.empty()) ct->fail("no template named 'default'");
      } else {
        ct->fail("expected a string or a list of {name, template}, got ", ct->type_name());
      }
    }
  } else if (jinja_path.empty()) {
    fail(config_path, ": cannot open file");
  }
  if (source.empty() && !jinja_path.empty() && fs::exists(jinja_path)) {
    source = read_whole_file(jinja_path);
    where = jinja_path;
  }
  if (source.empty()) fail(path, ": no chat_template (in tokenizer_config.json or chat_template.jinja)");
  return from_string(source, special, where);
}

namespace {

template <class J>
std::string render_impl(const jinja::Template& tmpl, const nlohmann::json& special_tokens, const J& messages,
                        bool add_generation_prompt, const J& extra) {
  if (!messages.is_array()) fail("chat template: messages must be a JSON array, got ", messages.type_name());
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].is_object()) fail("chat template: messages[", i, "] must be an object");
  }
  std::map<std::string, jinja::Value> globals;
  for (auto it = special_tokens.begin(); it != special_tokens.end(); ++it)
    globals[it.key()] = jinja::Value::from_json(it.value());
  globals["messages"] = jinja::Value::from_json(messages);
  globals["add_generation_prompt"] = jinja::Value(add_generation_prompt);
  globals["tools"] = jinja::Value(jinja::None{});
  globals["documents"] = jinja::Value(jinja::None{});
  if (!extra.is_null()) {
    if (!extra.is_object()) fail("chat template: extra variables must be a JSON object");
    for (auto it = extra.begin(); it != extra.end(); ++it)
      globals[it.key()] = jinja::Value::from_json(it.value());
  }
  return tmpl.render(globals);
}

}  // namespace

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra) const {
  return render_impl(*tmpl_, special_tokens_, messages, add_generation_prompt, extra);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra) const {
  return render_impl(*tmpl_, special_tokens_, messages, add_generation_prompt, extra);
}

}  // namespace dllm
