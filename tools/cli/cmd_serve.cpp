// `dllm serve`: an OpenAI-compatible HTTP server with streaming of the denoising and a web page
// (docs/server.md).
#include <filesystem>

#include "command.h"
#include "common.h"
#include "core/error.h"
#include "denoise_flags.h"
#include "server/server.h"

namespace dllm::cli {
namespace {

struct ServeCliOptions {
  std::string model = default_model_path();
  std::string model_id;
  std::string dtype = "auto";
  int threads = 0;
  DenoiseFlags denoise;
  server::ServeOptions serve;
};

void run_serve(ServeCliOptions& o) {
  server::ServeOptions& s = o.serve;
  GenerateParams& d = s.policy.defaults;
  if (o.denoise.threshold && *o.denoise.threshold == 0) o.denoise.threshold.reset();  // serve: 0 = off
  apply_denoise_flags(o.denoise, d);
  if (d.gen_length > s.policy.max_tokens)
    fail("--gen-length ", d.gen_length, " is over --max-tokens ", s.policy.max_tokens);
  if (s.port < 0 || s.port > 65535) fail("--port: ", s.port, " is not a TCP port");
  if (s.api_key.empty())
    if (const char* env = std::getenv("DLLM_API_KEY")) s.api_key = env;
  s.policy.model_id =
      o.model_id.empty() ? std::filesystem::path(o.model).lexically_normal().filename().string() : o.model_id;
  if (s.policy.model_id.empty())
    s.policy.model_id = std::filesystem::path(o.model).parent_path().filename().string();
  auto model = load_model_or_throw(o.model, parse_dtype(o.dtype), o.threads, s.quiet);
  exit_status() = server::serve(model, o.model, s);
}

void setup(CLI::App& app) {
  auto o = std::make_shared<ServeCliOptions>();
  server::ServeOptions& s = o->serve;
  s.policy.defaults.gen_length = 64;
  s.policy.defaults.stop_at_eos = true;
  auto* cmd =
      app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API, with a web page at /");
  cmd->add_option("-m,--model", o->model, "Model directory (Hugging Face layout)")->capture_default_str();
  cmd->add_option("--model-id", o->model_id, "Name of the model in the API (default: the directory's name)");
  cmd->add_option(
      "--tokenizer", s.tokenizer_dir,
      "Directory with tokenizer.json (+ tokenizer_config.json for the chat template), when not the "
      "model's");
  cmd->add_option("--host", s.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", s.port, "TCP port (0 = any free port; the one bound is printed)")
      ->capture_default_str();
  cmd->add_option(
      "--api-key", s.api_key,
      "Require 'Authorization: Bearer KEY' on /v1/* and /metrics (default: $DLLM_API_KEY if set)");
  add_weights_option(cmd);
  cmd->add_option("--dtype", o->dtype, kDtypeHelp)->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads for the model (0 = all cores)")->capture_default_str();
  // Request defaults (each can be overridden per request).
  cmd->add_option("--gen-length", s.policy.defaults.gen_length, "Default max_tokens")->capture_default_str();
  cmd->add_option("--steps", s.policy.defaults.steps, "Default steps (0 = one token per step)")
      ->capture_default_str();
  cmd->add_option("--block-length", s.policy.defaults.block_length, "Default block length (0 = one block)")
      ->capture_default_str();
  cmd->add_option("--temperature", s.policy.defaults.temperature, "Default temperature")
      ->capture_default_str();
  cmd->add_option("--cfg-scale", s.policy.defaults.cfg_scale, "Default classifier-free guidance scale")
      ->capture_default_str();
  add_denoise_flags(cmd, s.policy.defaults, o->denoise);  // the strategy axes
  cmd->get_option("--threshold")
      ->description(cmd->get_option("--threshold")->get_description() + " (0 = off)");
  cmd->add_flag(
         "--stop-at-eos,!--no-stop-at-eos", s.policy.defaults.stop_at_eos,
         "Stop denoising a row once its answer has ended (EOS committed with nothing masked before it); the "
         "text is the same, the canvas after it is not computed")
      ->capture_default_str();
  // Limits.
  cmd->add_option("--max-tokens", s.policy.max_tokens, "Largest max_tokens a request may ask for")
      ->capture_default_str();
  cmd->add_option("--max-prompt-tokens", s.policy.max_prompt_tokens, "Largest prompt")->capture_default_str();
  cmd->add_option("--max-n", s.policy.max_n, "Largest n (choices per request)")->capture_default_str();
  cmd->add_option("--max-queue", s.limits.max_queue, "Requests waiting beyond the batch; more answer 429")
      ->capture_default_str();
  cmd->add_option("--max-batch", s.limits.max_batch_rows, "Canvas rows denoised together in one forward")
      ->capture_default_str();
  cmd->add_option("--max-body", s.max_body_bytes, "Largest request body in bytes; more answer 413")
      ->capture_default_str();
  cmd->add_option("--mask-placeholder", s.policy.mask_placeholder,
                  "Text of a masked position in diffusing events")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", s.quiet, "No status lines on stderr");
  cmd->callback([o] { run_serve(*o); });
}

RegisterCommand registration("serve", setup);

}  // namespace
}  // namespace dllm::cli
