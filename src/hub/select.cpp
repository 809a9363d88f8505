#include "hub/select.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/error.h"

namespace dllm::hub {
namespace {

// Small files a checkpoint directory may hold that loading, the tokenizer or --chat read.
constexpr const char* kCheckpointFiles[] = {
    "config.json",           "generation_config.json",  "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "Q4_K_M" in "model-Q4_K_M.gguf", "model.q4_k_m.gguf", "model_Q4_K_M.gguf", "Q4_K_M/model.gguf" (not in
// "IQ4_K_M" nor, for "Q4_K", in "Q4_K_M"): the tag, case aside, after a character that is not a letter or
// digit and before one that is not a letter, digit or '_'.
bool has_tag(const std::string& path, const std::string& tag) {
  const std::string p = lower(path), t = lower(tag);
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = p.find(t); at != std::string::npos; at = p.find(t, at + 1)) {
    const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(p[at - 1]));
    const bool right = at + t.size() == p.size() || !word(p[at + t.size()]);
    if (left && right) return true;
  }
  return false;
}

std::string list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

Selection select_files(const std::vector<std::string>& repo_files, const HubRef& ref) {
  const std::set<std::string> have(repo_files.begin(), repo_files.end());
  std::vector<std::string> ggufs;
  for (const auto& f : repo_files)
    if (ends_with(lower(f), ".gguf") && base_name(f).rfind("mmproj", 0) != 0) ggufs.push_back(f);
  Selection s;
  auto one_gguf = [&](const std::string& file) {
    static const std::regex split(R"(-\d{5}-of-\d{5}\.gguf$)", std::regex::icase);
    if (std::regex_search(file, split))
      fail(ref.repo, ": ", file,
           " is one part of a split GGUF, which dllm does not load; merge the parts with "
           "llama.cpp's llama-gguf-split --merge, or pick another file");
    s.gguf = file;
    s.files = {file};
    return s;
  };
  if (!ref.file.empty()) {
    if (have.count(ref.file)) {
      if (!ends_with(lower(ref.file), ".gguf"))
        fail(ref.text(), ": ':", ref.file, "' names a file that is not a .gguf; leave it out to get the ",
             "checkpoint directory");
      return one_gguf(ref.file);
    }
    std::vector<std::string> matches;
    for (const auto& f : ggufs)
      if (has_tag(f, ref.file)) matches.push_back(f);
    if (ggufs.empty()) fail(ref.text(), ": ", ref.repo, " has no .gguf file to match ':", ref.file, "'");
    if (matches.empty())
      fail(ref.text(), ": no .gguf file of ", ref.repo, " matches '", ref.file, "'; it has: ", list(ggufs));
    if (matches.size() > 1)
      fail(ref.text(), ": several .gguf files of ", ref.repo, " match '", ref.file, "': ", list(matches),
           "; name one with :FILE");
    return one_gguf(matches.front());
  }
  const bool single = have.count("model.safetensors") > 0;
  const bool sharded = have.count("model.safetensors.index.json") > 0;
  if (have.count("config.json") && (single || sharded)) {
    for (const char* f : kCheckpointFiles)
      if (have.count(f)) s.files.push_back(f);
    if (sharded) {
      s.index = "model.safetensors.index.json";
      s.files.push_back(s.index);
    } else {
      s.files.push_back("model.safetensors");
    }
    return s;
  }
  if (ggufs.size() == 1) return one_gguf(ggufs.front());
  if (ggufs.size() > 1)
    fail(ref.repo, " holds several .gguf files: ", list(ggufs), "; pick one with ", ref.repo,
         ":QUANT (e.g. :Q4_K_M) or :FILE");
  fail(ref.repo,
       " has neither a checkpoint (config.json with model.safetensors or model.safetensors.index.json) ",
       "nor a .gguf file; dllm loads those");
}

std::vector<std::string> shards_in_index(const std::string& index_path) {
  std::ifstream in(index_path);
  if (!in) fail(index_path, ": cannot read");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(index_path, ": no 'weight_map' object");
  std::set<std::string> shards;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string()) fail(index_path, ": weight_map['", tensor, "'] is not a file name");
    const std::string f = file.get<std::string>();
    if (f.empty() || f.front() == '/' || f.find("..") != std::string::npos)
      fail(index_path, ": weight_map['", tensor, "'] = '", f, "' is not a file of the repository");
    shards.insert(f);
  }
  if (shards.empty()) fail(index_path, ": weight_map names no file");
  return {shards.begin(), shards.end()};
}

}  // namespace dllm::hub
