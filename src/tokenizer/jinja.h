// A Jinja2 subset interpreter for chat templates, configured like transformers' chat template environment
// (trim_blocks, lstrip_blocks, loop controls). Supported: {{ }}, {% if/elif/else %}, {% for ... in ... [if]
// %} with loop.* and {% else %}, {% set %} (incl. namespace attributes and block set), {% macro %} and calls,
// break / continue, {% generation %}, comments and whitespace control; Python-like expressions with filters,
// tests, slicing and the string / dict / list methods templates use. Anything else is an error naming it (and
// the line).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "tokenizer/jinja_value.h"

namespace dllm::jinja {

struct Node;

class Template {
 public:
  // Parses `source`; `name` prefixes error messages. Throws dllm::Error.
  explicit Template(const std::string& source, std::string name = "chat template");
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with the given global variables. Throws dllm::Error (also for raise_exception()).
  std::string render(const std::map<std::string, Value>& globals) const;

 private:
  std::string name_;
  std::shared_ptr<const Node> root_;
};

}  // namespace dllm::jinja
