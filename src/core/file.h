// Whole-file reads with errors that name the file: one helper for the tokenizer, the loaders and the CLI.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace dllm {

// The file's bytes. Throws dllm::Error "PATH: cannot open file" (plus `hint`, e.g. which flag names the
// file).
inline std::string read_whole_file(const std::string& path, const std::string& hint = "") {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open file", hint);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace dllm
