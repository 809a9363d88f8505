#include "hub/hub_ref.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>

namespace dllm::hub {
namespace {

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 96 || s.front() == '.' || s.back() == '.' || s.find("..") != std::string::npos)
    return false;
  return std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; });
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

}  // namespace

std::string HubRef::text() const {
  std::string t = repo;
  if (revision != "main") t += "@" + revision;
  if (!file.empty()) t += ":" + file;
  return t;
}

std::optional<HubRef> parse_hub_ref(const std::string& text) {
  HubRef ref;
  std::string rest = text;
  // ':' never occurs in a repository name nor (on the hub) in a revision: it starts the file or quant.
  if (const size_t colon = rest.find(':'); colon != std::string::npos) {
    ref.file = rest.substr(colon + 1);
    rest.resize(colon);
    if (ref.file.empty() || ref.file.find("..") != std::string::npos || ref.file.front() == '/')
      return std::nullopt;
  }
  if (const size_t at = rest.find('@'); at != std::string::npos) {
    ref.revision = rest.substr(at + 1);
    rest.resize(at);
    if (ref.revision.empty() || ref.revision.find("..") != std::string::npos) return std::nullopt;
    if (!std::all_of(ref.revision.begin(), ref.revision.end(), [](unsigned char c) {
          return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
        }))
      return std::nullopt;
  }
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || rest.find('/', slash + 1) != std::string::npos) return std::nullopt;
  if (!valid_name(rest.substr(0, slash)) || !valid_name(rest.substr(slash + 1))) return std::nullopt;
  ref.repo = rest;
  return ref;
}

bool env_true(const char* name) {
  std::string v = env(name);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

HubSettings HubSettings::from_env() {
  HubSettings s;
  if (const std::string e = env("HF_ENDPOINT"); !e.empty()) s.endpoint = e;
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
  std::string home = env("HOME");
  std::string xdg = env("XDG_CACHE_HOME");
  std::string hf_home = env("HF_HOME");
  if (hf_home.empty()) hf_home = (xdg.empty() ? home + "/.cache" : xdg) + "/huggingface";
  s.cache_dir = env("HF_HUB_CACHE");
  if (s.cache_dir.empty())
    s.cache_dir = env("HUGGINGFACE_HUB_CACHE");  // the older name, still read by the tools
  if (s.cache_dir.empty()) s.cache_dir = hf_home + "/hub";
  s.token = trim(env("HF_TOKEN"));
  if (s.token.empty()) {
    std::string path = env("HF_TOKEN_PATH");
    if (path.empty()) path = hf_home + "/token";
    std::ifstream in(path);
    std::string line;
    if (in && std::getline(in, line)) s.token = trim(line);
  }
  s.offline = env_true("HF_HUB_OFFLINE");
  return s;
}

}  // namespace dllm::hub
