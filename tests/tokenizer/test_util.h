// Shared helpers for the tokenizer tests.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dllm::test {

inline std::string tokenizer_dir(const std::string& name) {
  return std::string(DLLM_TEST_DATA) + "/tokenizers/" + name;
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace dllm::test
