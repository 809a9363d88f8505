#include "io/json_file.h"

#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "core/error.h"

namespace dllm {

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

nlohmann::json read_json_file(const std::string& path) {
  if (!file_exists(path)) fail(path, ": cannot open (missing, or not a regular file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
}

}  // namespace dllm
