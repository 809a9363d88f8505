// `dllm serve`: an OpenAI-compatible HTTP server for a diffusion LM (cpp-httplib), with streaming of the
// denoising, cross-request batching and a web page. Routes and event formats: docs/server.md.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "dllm/dllm.h"
#include "server/request.h"
#include "server/scheduler.h"

namespace dllm::server {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;            // 0 = any free port (the one bound is printed)
  std::string api_key;        // "" = no authentication
  std::string tokenizer_dir;  // where tokenizer.json / tokenizer_config.json are ("" = the model directory)
  RequestPolicy policy;
  SchedulerLimits limits;
  size_t max_body_bytes = 1 << 20;
  bool quiet = false;
};

// Serves `model` until SIGINT / SIGTERM. `on_listening(port)` runs once the socket is bound. Returns the
// process exit status; errors (bind failure, unreadable tokenizer) are a value: the message is printed.
int serve(std::shared_ptr<Model> model, const std::string& model_dir, const ServeOptions& options);

}  // namespace dllm::server
