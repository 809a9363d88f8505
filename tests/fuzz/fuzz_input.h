// Shared by the libFuzzer targets (tests/fuzz/*_fuzz.cpp): the parsers that take a path get the input through
// a file of this process's own, rewritten per input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace dllm::fuzz {

inline const std::string& input_path(const char* suffix) {
  static const std::string path = [&] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/dllm-fuzz-" + std::to_string(getpid()) + suffix;
  }();
  return path;
}

inline const std::string& write_input(const uint8_t* data, size_t size, const char* suffix) {
  const std::string& path = input_path(suffix);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace dllm::fuzz
