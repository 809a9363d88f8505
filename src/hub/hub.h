// `-m org/name[@revision][:quant-or-file]`: the model from the Hugging Face cache, downloaded into it first
// when it is not complete there. What the engine loads is a local path: the snapshot folder (a checkpoint
// directory whose files link to the cache's blobs) or the .gguf file in it.
#pragma once

#include <string>
#include <vector>

#include "hub/hub_ref.h"
#include "hub/progress.h"

namespace dllm::hub {

struct ResolveOptions {
  HubSettings settings;
  Report report;
  // Ask the hub for the revision's newest commit even when the cache holds the revision whole (`dllm pull`);
  // otherwise a complete cached snapshot is used with no network at all.
  bool refresh = false;
};

struct Resolved {
  std::string path;                // what Model::load takes
  std::string commit;              // the snapshot's commit
  std::vector<std::string> files;  // the files the engine uses, relative to the snapshot
  bool downloaded = false;         // something was fetched
};

Resolved resolve(const HubRef& ref, const ResolveOptions& options);

// An existing path as it is; else a hub id resolved as above; else an error that says both were tried.
std::string resolve_model_path(const std::string& text, const ResolveOptions& options);

}  // namespace dllm::hub
