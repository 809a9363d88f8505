// `dllm pull org/name[@revision][:quant]`: only the download, into the Hugging Face cache (docs/hub.md);
// prints the path that -m then loads. Unlike -m, it asks the hub for the revision's newest commit even when
// the cache has the revision whole.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "common.h"
#include "core/error.h"
#include "hub/hub.h"

namespace dllm::cli {
namespace {

struct PullOptions {
  std::string id;
  bool json = false;
  bool quiet = false;
};

void run_pull(const PullOptions& o) {
  const auto ref = hub::parse_hub_ref(o.id);
  if (!ref) fail("'", o.id, "' is not a Hugging Face id (org/name[@revision][:quant])");
  hub::ResolveOptions r;
  r.settings = hub::HubSettings::from_env();
  r.refresh = true;
  r.report.quiet = o.quiet || o.json;
  r.report.terminal = stderr_is_terminal();
  apply_hub_flags(r.settings);
  const hub::Resolved got = hub::resolve(*ref, r);
  if (o.json) {
    std::printf("%s\n", nlohmann::json({{"repo", ref->repo},
                                        {"revision", ref->revision},
                                        {"commit", got.commit},
                                        {"path", got.path},
                                        {"files", got.files},
                                        {"downloaded", got.downloaded}})
                            .dump()
                            .c_str());
    return;
  }
  r.report.line(ref->text() + (got.downloaded ? ": downloaded, commit " : ": up to date, commit ") +
                got.commit);
  std::printf("%s\n", got.path.c_str());
}

void setup(CLI::App& app) {
  auto o = std::make_shared<PullOptions>();
  auto* cmd = app.add_subcommand(
      "pull",
      "Download a model from the Hugging Face hub into its cache ($HF_HUB_CACHE, else $HF_HOME/hub, else "
      "~/.cache/huggingface/hub), resumable and checked; print the path -m loads");
  cmd->add_option(
         "id", o->id,
         "org/name[@revision][:quant]: :Q4_K_M (or :FILE.gguf) picks one GGUF file of a GGUF repository")
      ->required();
  cmd->add_flag("--json", o->json,
                "Print {repo, revision, commit, path, files, downloaded} and nothing on stderr");
  cmd->add_flag("-q,--quiet", o->quiet, "No progress on stderr");
  add_hub_options(cmd);
  cmd->callback([o] { run_pull(*o); });
}

RegisterCommand registration("pull", setup);

}  // namespace
}  // namespace dllm::cli
