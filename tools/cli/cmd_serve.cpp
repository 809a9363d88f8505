// `dllm serve`: an OpenAI-compatible HTTP server with streaming of the denoising and a web page
// (docs/server.md); several models and the router behind model "auto": docs/hybrid.md.
#include <cctype>
#include <chrono>
#include <filesystem>
#include <optional>

#include "command.h"
#include "common.h"
#include "core/error.h"
#include "denoise_flags.h"
#include "server/server.h"

namespace dllm::cli {
namespace {

constexpr const char* kRouterHelp = R"(Several models and the router (docs/hybrid.md):
  dllm serve --model dllm=models/demo --model ar=QWEN_DIR
serves both; /v1/models lists each with dllm.kind (diffusion | autoregressive) and the virtual model "auto".
A request names a model, names none (the first, the default), or names "auto": the router then picks, first
rule that applies:
  1. one kind of model loaded                     -> the first model            reason only_kind
  2. /v1/completions with a non-empty suffix      -> the diffusion model        reason infill
  3. a diffusion-only field (steps, block_length,
     threshold, diffusing, ...)                   -> the diffusion model        reason diffusion_fields
  4. a --route-keywords word in the last user
     message (chat) or the prompt (completions)   -> the diffusion model        reason keyword
  5. max_tokens > --route-short-max-tokens        -> the diffusion model        reason long_generation
  6. otherwise                                    -> the autoregressive model   reason short_generation
("the diffusion / autoregressive model": the first of that kind, in --model order.) Every answer says where it
went and why in dllm.route {model, kind, reason, detail} (streams: in the first chunk), and /metrics counts
dllm_route_total{model, reason} (reason "requested" / "default" for requests that name a model / none).
Diffusion-only fields sent to an autoregressive model are a 400 naming the field.)";

struct ServeCliOptions {
  std::vector<std::string> models;  // PATH or NAME=PATH, in order (the first is the default)
  std::string model_id;
  std::string tokenizer_dir;  // for the first model
  std::optional<std::string> route_keywords;
  std::vector<std::string> drafts;  // [NAME=]PATH: diffusion drafters of autoregressive models
  DraftParams draft;
  std::string dtype = "auto";
  int threads = 0;
  DenoiseFlags denoise;
  server::ServeOptions serve;
};

// The API name of a model given by path alone: its directory's (or file's) name.
std::string name_of_path(const std::string& path) {
  std::string name = std::filesystem::path(path).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::path(path).lexically_normal().parent_path().filename().string();
  return name;
}

// "NAME=PATH" -> {NAME, PATH}; "PATH" (or a path that exists though it holds '=') -> {"", PATH}.
std::pair<std::string, std::string> split_model_arg(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || std::filesystem::exists(arg)) return {"", arg};
  const std::string name = arg.substr(0, eq), path = arg.substr(eq + 1);
  if (name.empty() || path.empty()) fail("--model: '", arg, "' is not PATH or NAME=PATH");
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':'))
      fail("--model: the name '", name, "' may hold letters, digits and - _ . : only");
  return {name, path};
}

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
  if (s.router.short_max_tokens < 0) fail("--route-short-max-tokens must be >= 0");
  if (o.route_keywords) s.router.keywords = server::split_keywords(*o.route_keywords);
  if (o.models.empty()) o.models.push_back(default_model_path());
  std::vector<server::ModelSpec> specs;
  for (size_t i = 0; i < o.models.size(); ++i) {
    auto [name, path] = split_model_arg(o.models[i]);
    if (name.empty()) name = i == 0 && !o.model_id.empty() ? o.model_id : name_of_path(path);
    server::ModelSpec spec;
    spec.name = name;
    spec.path = resolve_model(path, s.quiet);  // a Hugging Face id -> its snapshot in the cache
    if (i == 0) spec.tokenizer_dir = o.tokenizer_dir;
    for (const auto& other : specs)
      if (other.name == name)
        fail("--model: two models are named '", name, "'; name them apart with --model NAME=PATH");
    if (name == "auto") fail("--model: 'auto' is the router's name; name the model otherwise (NAME=PATH)");
    const auto t0 = std::chrono::steady_clock::now();
    spec.model = load_model_or_throw(spec.path, parse_dtype(o.dtype), o.threads, s.quiet);
    spec.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    specs.push_back(std::move(spec));
  }
  // --draft [NAME=]PATH: a diffusion drafter for the autoregressive model NAME (default: the first one).
  if (!o.drafts.empty() && (o.draft.tokens < 1 || o.draft.steps < 1 || o.draft.steps > o.draft.tokens))
    fail("--draft-tokens must be >= 1 and --draft-steps in [1, --draft-tokens]");
  for (const auto& arg : o.drafts) {
    auto [name, given] = split_model_arg(arg);
    const std::string path = resolve_model(given, s.quiet);
    server::ModelSpec* target = nullptr;
    for (auto& spec : specs)
      if (name.empty() ? spec.model->info().autoregressive && !target : spec.name == name) target = &spec;
    if (!target)
      fail("--draft ", arg, ": ",
           name.empty() ? "no autoregressive model is served" : "no served model is named '" + name + "'");
    if (!target->model->info().autoregressive)
      fail("--draft ", arg, ": '", target->name,
           "' is a diffusion model; drafts are verified by an autoregressive one");
    if (target->drafter) fail("--draft: '", target->name, "' has two drafters");
    check_same_vocabulary(target->path, path);
    target->drafter = load_model_or_throw(path, parse_dtype(o.dtype), o.threads, s.quiet);
    target->draft = o.draft;
    if (target->drafter->info().autoregressive || target->drafter->info().block_size > 0 ||
        target->drafter->info().mask_id < 0)
      fail("--draft ", arg,
           ": the drafter must be a bidirectional diffusion model (LLaDA, Dream) with a [MASK] id");
  }
  exit_status() = server::serve(specs, s);
}

void setup(CLI::App& app) {
  auto o = std::make_shared<ServeCliOptions>();
  server::ServeOptions& s = o->serve;
  s.policy.defaults.gen_length = 64;
  s.policy.defaults.stop_at_eos = true;
  auto* cmd = app.add_subcommand(
      "serve", "Serve one or several models over an OpenAI-compatible HTTP API, with a web page at /");
  cmd->footer(kRouterHelp);
  cmd->add_option(
      "-m,--model", o->models,
      "A model to serve: PATH (a Hugging Face directory or a GGUF file; named in the API after its "
      "directory) or NAME=PATH; repeat for several (diffusion and autoregressive alike). The first is "
      "the default, for requests that name no model. Default: " +
          default_model_path());
  cmd->add_option("--model-id", o->model_id,
                  "Name in the API of the first model when it is given as a plain PATH (default: the "
                  "directory's name)");
  cmd->add_option("--tokenizer", o->tokenizer_dir,
                  "Directory with tokenizer.json (+ tokenizer_config.json for the chat template) for the "
                  "first model, when "
                  "not the model's own");
  cmd->add_option("--route-short-max-tokens", s.router.short_max_tokens,
                  "Router (model \"auto\"): max_tokens at or below this is a short generation -> the "
                  "autoregressive model; above -> the diffusion model")
      ->capture_default_str();
  std::string keywords;
  for (const auto& k : s.router.keywords) keywords += (keywords.empty() ? "" : ",") + k;
  cmd->add_option(
      "--route-keywords", o->route_keywords,
      "Router: comma-separated keywords that send a request to the diffusion model when one starts a "
      "word of the last user message (chat) or the prompt (completions), case-insensitive; \"\" = "
      "none. Default: " +
          keywords);
  cmd->add_option(
      "--draft", o->drafts,
      "[NAME=]PATH: a diffusion model (same tokenizer) that drafts tokens for the autoregressive model "
      "NAME (default: the first one), verified in one forward: speculative decoding, greedy output "
      "unchanged (docs/hybrid.md); repeatable, one per AR model");
  add_draft_options(cmd, o->draft);
  cmd->add_option("--host", s.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", s.port, "TCP port (0 = any free port; the one bound is printed)")
      ->capture_default_str();
  cmd->add_option(
      "--api-key", s.api_key,
      "Require 'Authorization: Bearer KEY' on /v1/* and /metrics (default: $DLLM_API_KEY if set)");
  add_weights_option(cmd);
  cmd->add_option("--dtype", o->dtype, kDtypeHelp)->capture_default_str();
  add_backend_options(cmd);
  add_hub_options(cmd);
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
  cmd->add_option("--request-timeout", s.request_timeout_seconds,
                  "Seconds a request may take, queue included; one still running then ends with a 504 error "
                  "(0 = no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option(
         "--drain-seconds", s.drain_seconds,
         "On SIGTERM / SIGINT: new requests answer 503 and /health says draining while the requests in "
         "flight finish; those still running after this many seconds end with a 503 error; then the "
         "server exits 0 (a second signal stops at once)")
      ->check(CLI::NonNegativeNumber)
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
