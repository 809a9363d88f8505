// Reading JSON files with errors that name the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dllm {

nlohmann::json read_json_file(const std::string& path);  // throws dllm::Error naming the path
bool file_exists(const std::string& path);

}  // namespace dllm
