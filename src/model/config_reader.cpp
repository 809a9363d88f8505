#include "model/config_reader.h"

#include "core/error.h"

namespace dllm {

void ConfigReader::fail_field(const std::string& key, const std::string& why) const {
  fail(file_, ": field '", key, "' ", why);
}

std::optional<int64_t> ConfigReader::optional_int(const std::string& key) const {
  if (!json_.contains(key) || json_[key].is_null()) return std::nullopt;
  const auto& v = json_[key];
  if (!v.is_number_integer()) fail_field(key, "must be an integer, got " + v.dump());
  return v.get<int64_t>();
}

int64_t ConfigReader::positive_int(const std::string& key) const {
  auto v = optional_int(key);
  if (!v) fail_field(key, "is missing");
  if (*v <= 0) fail_field(key, "must be > 0, got " + std::to_string(*v));
  return *v;
}

std::optional<double> ConfigReader::optional_number(const std::string& key) const {
  if (!json_.contains(key) || json_[key].is_null()) return std::nullopt;
  const auto& v = json_[key];
  if (!v.is_number()) fail_field(key, "must be a number, got " + v.dump());
  return v.get<double>();
}

double ConfigReader::positive_number(const std::string& key) const {
  auto v = optional_number(key);
  if (!v) fail_field(key, "is missing");
  if (!(*v > 0)) fail_field(key, "must be > 0, got " + json_[key].dump());
  return *v;
}

std::optional<bool> ConfigReader::optional_bool(const std::string& key) const {
  if (!json_.contains(key) || json_[key].is_null()) return std::nullopt;
  if (!json_[key].is_boolean()) fail_field(key, "must be true or false, got " + json_[key].dump());
  return json_[key].get<bool>();
}

std::optional<std::string> ConfigReader::optional_string(const std::string& key) const {
  if (!json_.contains(key) || json_[key].is_null()) return std::nullopt;
  if (!json_[key].is_string()) fail_field(key, "must be a string, got " + json_[key].dump());
  return json_[key].get<std::string>();
}

std::optional<int64_t> ConfigReader::optional_token_id(const std::string& key) const {
  if (!json_.contains(key) || json_[key].is_null()) return std::nullopt;
  const auto& v = json_[key];
  if (v.is_array()) {
    if (v.empty()) return std::nullopt;
    if (!v[0].is_number_integer()) fail_field(key, "must hold integer token ids, got " + v.dump());
    return v[0].get<int64_t>();
  }
  if (!v.is_number_integer()) fail_field(key, "must be an integer token id, got " + v.dump());
  return v.get<int64_t>();
}

}  // namespace dllm
