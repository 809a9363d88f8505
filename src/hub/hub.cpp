#include "hub/hub.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hub/cache.h"
#include "hub/download.h"
#include "hub/http.h"
#include "hub/select.h"

namespace dllm::hub {
namespace {

// The snapshot's files, when they are every file the engine needs; nullopt when something is missing.
std::optional<Resolved> from_snapshot(const RepoCache& cache, const std::string& commit, const HubRef& ref) {
  const auto files = cache.snapshot_files(commit);
  if (files.empty()) return std::nullopt;
  Selection s;
  try {
    s = select_files(files, ref);
  } catch (const Error&) {
    return std::nullopt;  // not enough here to choose: the hub's list decides (or says what is wrong)
  }
  std::vector<std::string> need = s.files;
  if (!s.index.empty())
    for (auto& shard : shards_in_index(cache.snapshot_dir(commit) + "/" + s.index)) need.push_back(shard);
  for (const auto& f : need)
    if (!cache.has_file(commit, f)) return std::nullopt;
  Resolved r;
  r.commit = commit;
  r.files = need;
  r.path = cache.snapshot_dir(commit) + (s.gguf.empty() ? "" : "/" + s.gguf);
  return r;
}

std::string list_of(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

Resolved resolve(const HubRef& ref, const ResolveOptions& o) {
  const HubSettings& s = o.settings;
  const RepoCache cache(s.cache_dir, ref.repo);
  const auto cached_commit = cache.commit_for(ref.revision);
  if (cached_commit && (!o.refresh || s.offline))
    if (auto r = from_snapshot(cache, *cached_commit, ref)) return *r;
  if (s.offline) {
    if (!cached_commit)
      fail(ref.text(), ": not in the model cache (", cache.dir(), " has no ", ref.revision,
           ") and offline mode (--offline / HF_HUB_OFFLINE) forbids downloading it");
    const auto files = cache.snapshot_files(*cached_commit);
    select_files(files, ref);  // says what is ambiguous or missing when it can
    fail(ref.text(), ": the cached snapshot ", cache.snapshot_dir(*cached_commit),
         " lacks files the model needs (it has: ", list_of(files),
         ") and offline mode (--offline / HF_HUB_OFFLINE) forbids downloading them");
  }

  const Http http(s.token, s.endpoint);
  const std::string api =
      s.endpoint + "/api/models/" + ref.repo + "/revision/" + url_escape(ref.revision, /*keep_slash=*/false);
  const HttpResponse listing = http.get(api);
  if (listing.status != 200) fail_http(listing, s.endpoint, ref.repo, ref.text());
  const auto info = nlohmann::json::parse(listing.body, nullptr, /*allow_exceptions=*/false);
  if (!info.is_object() || !info.contains("sha") || !info["sha"].is_string() || !info.contains("siblings") ||
      !info["siblings"].is_array())
    fail(api, ": not a model listing (no 'sha' and 'siblings')");
  const std::string commit = info["sha"].get<std::string>();
  if (!is_commit(commit)) fail(api, ": 'sha' is not a commit: ", commit);
  std::vector<std::string> files;
  for (const auto& sib : info["siblings"])
    if (sib.is_object() && sib.contains("rfilename") && sib["rfilename"].is_string())
      files.push_back(sib["rfilename"].get<std::string>());
  const Selection sel = select_files(files, ref);

  Resolved r;
  r.commit = commit;
  auto fetch = [&](const std::string& f) {
    if (!cache.has_file(commit, f)) r.downloaded = true;
    fetch_file(http, cache, s.endpoint, ref.repo, commit, f, o.report);
    r.files.push_back(f);
  };
  for (const auto& f : sel.files) fetch(f);
  if (!sel.index.empty())
    for (const auto& shard : shards_in_index(cache.snapshot_dir(commit) + "/" + sel.index)) fetch(shard);
  cache.write_ref(ref.revision, commit);
  r.path = cache.snapshot_dir(commit) + (sel.gguf.empty() ? "" : "/" + sel.gguf);
  return r;
}

std::string resolve_model_path(const std::string& text, const ResolveOptions& o) {
  struct stat st {};
  if (::stat(text.c_str(), &st) == 0) return text;
  const auto ref = parse_hub_ref(text);
  if (!ref) fail(text, ": no such file or directory (nor a Hugging Face id: org/name[@revision][:quant])");
  const Resolved r = resolve(*ref, o);
  o.report.line(ref->text() + " -> " + r.path + (r.downloaded ? "" : " (cached)"));
  return r.path;
}

}  // namespace dllm::hub
