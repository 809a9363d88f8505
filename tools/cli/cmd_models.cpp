// `dllm models`: what the Hugging Face cache holds (docs/hub.md), with sizes; models downloaded by the Python
// tools are listed too (one cache, one layout).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "hub/cache.h"
#include "hub/hub_ref.h"
#include "hub/progress.h"

namespace dllm::cli {
namespace {

void run_models(bool json) {
  const hub::HubSettings s = hub::HubSettings::from_env();
  const auto repos = hub::list_cache(s.cache_dir);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : repos)
      out.push_back({{"repo", r.repo},
                     {"bytes", r.bytes},
                     {"partial_bytes", r.partial_bytes},
                     {"refs", r.refs},
                     {"snapshots", r.snapshots},
                     {"path", hub::RepoCache(s.cache_dir, r.repo).dir()}});
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("cache: %s\n", s.cache_dir.c_str());
  if (repos.empty()) std::printf("(no models)\n");
  for (const auto& r : repos) {
    std::string refs;
    for (const auto& [rev, commit] : r.refs)
      refs += (refs.empty() ? "" : ", ") + rev + " " + commit.substr(0, 8);
    if (refs.empty() && !r.snapshots.empty()) refs = r.snapshots.front().substr(0, 8);
    std::printf(
        "%-48s %10s  %s%s\n", r.repo.c_str(), hub::Progress::bytes(static_cast<double>(r.bytes)).c_str(),
        refs.c_str(),
        r.partial_bytes
            ? ("  (+" + hub::Progress::bytes(static_cast<double>(r.partial_bytes)) + " partial)").c_str()
            : "");
  }
}

void setup(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto* cmd =
      app.add_subcommand("models",
                         "List the models in the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else "
                         "~/.cache/huggingface/hub) with their sizes and revisions");
  cmd->add_flag("--json", *json, "One JSON array: {repo, bytes, partial_bytes, refs, snapshots, path}");
  cmd->callback([json] { run_models(*json); });
}

RegisterCommand registration("models", setup);

}  // namespace
}  // namespace dllm::cli
