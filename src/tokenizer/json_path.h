// Typed access to a JSON document that reports errors with the JSON path of the offending field,
// e.g. "tokenizer.json: $.model.merges[12]: expected a string".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace dllm::tok {

class JNode {
 public:
  JNode(const nlohmann::json& j, std::string file, std::string path = "$")
      : j_(&j), file_(std::move(file)), path_(std::move(path)) {}

  const nlohmann::json& json() const { return *j_; }
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  bool is_null() const { return j_->is_null(); }

  template <class... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    dllm::fail(file_, ": ", path_, ": ", std::forward<Parts>(parts)...);
  }

  // Required member (the node must be an object and have the key, possibly null).
  JNode operator[](std::string_view key) const {
    if (!j_->is_object()) fail("expected an object, got ", type_name());
    auto it = j_->find(key);
    if (it == j_->end()) child_path_fail(key, "missing required field");
    return JNode(*it, file_, path_ + "." + std::string(key));
  }
  // Optional member: absent or null gives nullopt.
  std::optional<JNode> opt(std::string_view key) const {
    if (!j_->is_object()) fail("expected an object, got ", type_name());
    auto it = j_->find(key);
    if (it == j_->end() || it->is_null()) return std::nullopt;
    return JNode(*it, file_, path_ + "." + std::string(key));
  }
  JNode at(size_t i) const { return JNode((*j_)[i], file_, path_ + "[" + std::to_string(i) + "]"); }
  size_t size() const {
    if (!j_->is_array()) fail("expected an array, got ", type_name());
    return j_->size();
  }
  void expect_object() const {
    if (!j_->is_object()) fail("expected an object, got ", type_name());
  }

  const std::string& str() const {
    if (!j_->is_string()) fail("expected a string, got ", type_name());
    return j_->get_ref<const std::string&>();
  }
  int64_t integer() const {
    if (!j_->is_number_integer()) fail("expected an integer, got ", type_name());
    return j_->get<int64_t>();
  }
  int32_t id() const {
    int64_t v = integer();
    if (v < 0 || v > INT32_MAX) fail("token id out of range: ", v);
    return static_cast<int32_t>(v);
  }
  bool boolean() const {
    if (!j_->is_boolean()) fail("expected a boolean, got ", type_name());
    return j_->get<bool>();
  }
  double number() const {
    if (!j_->is_number()) fail("expected a number, got ", type_name());
    return j_->get<double>();
  }
  // Optional typed members with defaults.
  bool get_bool(std::string_view key, bool def) const {
    auto n = opt(key);
    return n ? n->boolean() : def;
  }
  std::string get_str(std::string_view key, std::string def) const {
    auto n = opt(key);
    return n ? n->str() : def;
  }
  int64_t get_int(std::string_view key, int64_t def) const {
    auto n = opt(key);
    return n ? n->integer() : def;
  }
  const char* type_name() const { return j_->is_null() ? "null" : j_->type_name(); }

 private:
  [[noreturn]] void child_path_fail(std::string_view key, const char* msg) const {
    dllm::fail(file_, ": ", path_, ".", key, ": ", msg);
  }
  const nlohmann::json* j_;
  std::string file_;
  std::string path_;
};

}  // namespace dllm::tok
