// Values of the Jinja subset used by chat templates (tokenizer/chat_template.h): Python-like semantics for
// truthiness, str(), comparisons and json.dumps.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace dllm::jinja {

class Value;
using List = std::vector<Value>;
// Insertion-ordered, like a Python dict.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(const std::string& key, Value v);
};
struct Args;
using Function = std::function<Value(Args&)>;

struct Undefined {
  std::string name;  // what was undefined, for error messages
};
struct None {};
// namespace(): a dict whose attributes can be assigned with {% set ns.x = ... %}.
struct Namespace {
  std::shared_ptr<Dict> dict;
};

class Value {
 public:
  using Storage = std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<List>,
                               std::shared_ptr<Dict>, Namespace, std::shared_ptr<Function>>;
  Value() : v_(Undefined{}) {}
  Value(None) : v_(None{}) {}                                          // NOLINT
  Value(bool b) : v_(b) {}                                             // NOLINT
  Value(int64_t i) : v_(i) {}                                          // NOLINT
  Value(int i) : v_(static_cast<int64_t>(i)) {}                        // NOLINT
  Value(size_t i) : v_(static_cast<int64_t>(i)) {}                     // NOLINT
  Value(double d) : v_(d) {}                                           // NOLINT
  Value(std::string s) : v_(std::move(s)) {}                           // NOLINT
  Value(const char* s) : v_(std::string(s)) {}                         // NOLINT
  Value(List l) : v_(std::make_shared<List>(std::move(l))) {}          // NOLINT
  Value(Dict d) : v_(std::make_shared<Dict>(std::move(d))) {}          // NOLINT
  Value(Namespace n) : v_(std::move(n)) {}                             // NOLINT
  Value(Function f) : v_(std::make_shared<Function>(std::move(f))) {}  // NOLINT
  // A Python tuple: a list that prints as "(a, b)".
  static Value tuple(List l) {
    Value v(std::move(l));
    v.tuple_ = true;
    return v;
  }
  bool is_tuple() const { return tuple_; }
  static Value undefined(std::string name) { return Value(Storage(Undefined{std::move(name)})); }
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);  // keeps the key order, like Python dicts

  bool is_undefined() const { return std::holds_alternative<Undefined>(v_); }
  bool is_none() const { return std::holds_alternative<None>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(v_); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(v_) || is_namespace(); }
  bool is_namespace() const { return std::holds_alternative<Namespace>(v_); }
  bool is_function() const { return std::holds_alternative<std::shared_ptr<Function>>(v_); }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_number() const {
    return is_int() ? static_cast<double>(as_int()) : is_bool() ? as_bool() : std::get<double>(v_);
  }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  List& as_list() const { return *std::get<std::shared_ptr<List>>(v_); }
  Dict& as_dict() const {
    if (is_namespace()) return *std::get<Namespace>(v_).dict;
    return *std::get<std::shared_ptr<Dict>>(v_);
  }
  const Function& as_function() const { return *std::get<std::shared_ptr<Function>>(v_); }
  const std::string& undefined_name() const { return std::get<Undefined>(v_).name; }

  bool truthy() const;
  // Python str(); undefined prints as "".
  std::string str() const;
  // Python repr() (strings quoted), used inside str() of lists and dicts.
  std::string repr() const;
  // json.dumps(ensure_ascii=False); indent < 0: one line with ", " and ": " separators.
  std::string to_json(int indent = -1, bool sort_keys = false) const;
  const char* type_name() const;

 private:
  explicit Value(Storage s) : v_(std::move(s)) {}
  Storage v_;
  bool tuple_ = false;
};

bool values_equal(const Value& a, const Value& b);

// Arguments of a call: positional, then keyword.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Positional i, else keyword `name`, else nullptr.
  const Value* get(size_t i, std::string_view name) const {
    if (i < pos.size()) return &pos[i];
    for (const auto& [k, v] : kw)
      if (k == name) return &v;
    return nullptr;
  }
};

}  // namespace dllm::jinja
