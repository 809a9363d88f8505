// Typed access to config.json fields with errors that name the file and the field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace dllm {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& json, std::string file) : json_(json), file_(std::move(file)) {}

  int64_t positive_int(const std::string& key) const;
  std::optional<int64_t> optional_int(const std::string& key) const;  // absent or null -> nullopt
  double positive_number(const std::string& key) const;
  std::optional<double> optional_number(const std::string& key) const;
  std::optional<bool> optional_bool(const std::string& key) const;
  std::optional<std::string> optional_string(const std::string& key) const;
  // A token id field may be an int or a list of ints (HF eos_token_id); the first entry is returned.
  std::optional<int64_t> optional_token_id(const std::string& key) const;

  [[noreturn]] void fail_field(const std::string& key, const std::string& why) const;
  const std::string& file() const { return file_; }

 private:
  const nlohmann::json& json_;
  std::string file_;
};

}  // namespace dllm
