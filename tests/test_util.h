// Helpers shared by the tests: fixture paths, .npy reading, golden JSON.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dllm/dllm.h"

namespace dllm::test {

inline std::string data_path(const std::string& rel) {
  return std::string(DLLM_TEST_DATA) + "/" + rel;
}

// The backend the golden tests load their models on: DLLM_TEST_BACKEND=vulkan runs them on the Vulkan backend
// (tests/CMakeLists.txt runs every family's goldens so, on lavapipe); unset or "cpu", the CPU.
inline dllm::BackendKind backend() {
  const char* env = std::getenv("DLLM_TEST_BACKEND");
  const std::string name = env ? env : "cpu";
  if (name == "cpu") return dllm::BackendKind::kCpu;
  if (name == "vulkan") return dllm::BackendKind::kVulkan;
  throw std::runtime_error("DLLM_TEST_BACKEND='" + name + "' must be cpu or vulkan");
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(read_file(path));
}

// JSON lines, or a JSON object whose "cases" field is one object per line (the oracle's generate.json).
// Throws when there is none, so that a loop over them cannot pass by running zero times.
inline std::vector<nlohmann::json> read_cases(const std::string& path) {
  auto cases = read_json(path)["cases"].get<std::vector<nlohmann::json>>();
  if (cases.empty()) throw std::runtime_error(path + ": no cases");
  return cases;
}

// The kernel's transparent huge page mode ("always [madvise] never"); empty where the file is missing.
inline std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(in, mode);
  return mode;
}
inline bool thp_off() {
  const std::string mode = thp_mode();
  return mode.empty() || mode.find("[never]") != std::string::npos;
}

// A field in kB ("AnonHugePages", "FilePmdMapped") of the /proc/self/smaps entry of the mapping that holds p;
// -1 when there is none.
inline long smaps_kb(const void* p, const std::string& field) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  bool in_mapping = false;
  const std::string key = field + ":";
  for (std::string line; std::getline(smaps, line);) {
    unsigned long long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &begin, &end) == 2 && line.find(' ') > 8) {
      in_mapping = begin <= at && at < end;
      continue;
    }
    if (in_mapping && line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
  }
  return -1;
}

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Reads a little-endian float32 C-order .npy file (what the oracle ships).
inline NpyArray read_npy(const std::string& path) {
  const std::string bytes = read_file(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw std::runtime_error("not npy: " + path);
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    offset = 10;
  } else {
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  }
  const std::string header = bytes.substr(offset, header_len);
  if (header.find("'<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
    throw std::runtime_error("unsupported npy header in " + path + ": " + header);
  NpyArray a;
  const size_t open = header.find('(', header.find("'shape'")), close = header.find(')', open);
  std::stringstream dims(header.substr(open + 1, close - open - 1));
  std::string item;
  size_t n = 1;
  while (std::getline(dims, item, ','))
    if (item.find_first_not_of(' ') != std::string::npos) {
      a.shape.push_back(std::stoll(item));
      n *= static_cast<size_t>(a.shape.back());
    }
  a.data.resize(n);
  std::memcpy(a.data.data(), bytes.data() + offset + header_len, n * 4);
  return a;
}

// n normal values of standard deviation s (mt19937 seeded with `seed`): random weights and activations for
// the kernel tests.
inline std::vector<float> randn(size_t n, uint32_t seed, float s) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, s);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// max |got - want| / max(1, max |want|): the error measure the kernel and backend tests bound.
inline float max_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  float diff = 0, scale = 1;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return diff / scale;
}

}  // namespace dllm::test
