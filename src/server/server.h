// `dllm serve`: an OpenAI-compatible HTTP server for diffusion LMs and autoregressive LMs (cpp-httplib), with
// streaming of the denoising, cross-request batching and a web page. Several models may be served at once,
// each with its own tokenizer, chat template and scheduler; requests name one, or "auto" for the router
// (server/router.h). Routes and event formats: docs/server.md; several models and the router: docs/hybrid.md.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dllm/dllm.h"
#include "server/request.h"
#include "server/router.h"
#include "server/scheduler.h"

namespace dllm::server {

// One model to serve.
struct ModelSpec {
  std::string name;  // its id in the API (unique, not "auto")
  std::string path;  // where it was loaded from: its tokenizer.json / chat template are looked up there
  std::string tokenizer_dir;  // "" = path
  std::shared_ptr<Model> model;
  double load_seconds = 0;  // reported by /health (cold start)
  // Autoregressive models: a diffusion drafter for speculative decoding (dllm::generate_speculative; the
  // caller has checked that it shares the tokenizer), or nullptr.
  std::shared_ptr<Model> drafter;
  DraftParams draft;
};

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0 = any free port (the one bound is printed)
  std::string api_key;  // "" = no authentication
  // Request defaults and limits, for every model (policy.model_id is each model's name). The diffusion
  // defaults (steps, block length, strategy, cfg, mask / EOS ids, stop-at-EOS) apply to diffusion models
  // only; an autoregressive model takes gen_length, temperature, top_k and top_p from them.
  RequestPolicy policy;
  SchedulerLimits limits;  // per model
  RouterConfig router;
  size_t max_body_bytes = 1 << 20;
  double request_timeout_seconds =
      0;                      // > 0: a request still running after this (queue included) ends with 504
  double drain_seconds = 30;  // SIGTERM: how long requests in flight may take before they are ended
  bool quiet = false;
};

// Serves `models` (the first is the default: requests that name no model go there) until SIGINT / SIGTERM:
// the first signal drains (new requests 503, requests in flight finish within drain_seconds), then returns 0.
// Returns the process exit status; errors (bind failure, unreadable tokenizer) are a value: the message is
// printed.
int serve(const std::vector<ModelSpec>& models, const ServeOptions& options);

}  // namespace dllm::server
