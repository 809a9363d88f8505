#include "server/server.h"

#include <httplib.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "denoise/canvas_edit.h"
#include "server/responses.h"
#include "server/text_codec.h"
#include "server/web_assets.h"

namespace dllm::server {
namespace {

using nlohmann::json;

// SIGTERM / SIGINT write one byte here (write(2) is async-signal-safe); App's lifecycle thread reads it and
// drains (the first signal) or stops at once (the second).
int g_signal_pipe[2] = {-1, -1};

void on_signal(int) {
  if (g_signal_pipe[1] >= 0) {
    const char b = 's';
    [[maybe_unused]] const ssize_t n = write(g_signal_pipe[1], &b, 1);
  }
}

// The answer of a job that ended with an error: the engine's (500), or the server's own (a deadline: 504, a
// drain that ran out of time: 503).
ApiError job_error(const Job& j) {
  return {j.error_status(), *j.error(), "", "server_error", j.error_status() == 500 ? "" : j.error_code()};
}

constexpr auto kHeartbeat = std::chrono::milliseconds(1000);

// The request field a DenoiseLoop validation message is about (its messages name GenerateParams fields): the
// name that occurs first in the message, among the fields the request gave when one of them occurs (a message
// may name another field in passing: "remasking is ... (the threshold goes with ...)"); at one position the
// longer name ("editing_threshold" holds "threshold").
std::string param_of(const std::string& message, const json& body) {
  static const char* const kFields[] = {"editing_threshold",
                                        "max_post_steps",
                                        "num_to_transfer",
                                        "minimal_topk",
                                        "stop_at_eos",
                                        "eos_early_stop",
                                        "mask_id",
                                        "eos_id",
                                        "block_length",
                                        "steps",
                                        "threshold",
                                        "factor",
                                        "top_p",
                                        "top_k",
                                        "cfg_scale",
                                        "temperature",
                                        "alg_temp",
                                        "cache",
                                        "remasking",
                                        "unmask",
                                        "alg",
                                        "schedule",
                                        "sampler"};
  std::string best;
  size_t best_at = std::string::npos;
  for (bool given_only : {true, false}) {
    for (const char* f : kFields) {
      if (given_only && !body.contains(f)) continue;
      const size_t at = message.find(f);
      if (at == std::string::npos) continue;
      if (best_at == std::string::npos || at < best_at || (at == best_at && std::strlen(f) > best.size())) {
        best = f;
        best_at = at;
      }
    }
    if (!best.empty()) return best;
  }
  if (message.find("gen_length") != std::string::npos) return "max_tokens";
  if (message.find("prompt") != std::string::npos) return "prompt";
  return "";
}

// A served model: its codec, request policy, metrics and runner.
struct Served {
  std::string name;
  ModelKind kind = ModelKind::kDiffusion;
  std::shared_ptr<Model> model;
  double load_seconds = 0;         // how long its load took (ModelSpec)
  std::shared_ptr<Model> drafter;  // autoregressive models: speculative decoding (nullptr: none)
  DraftParams draft;
  TextCodec codec;
  RequestPolicy policy;
  Metrics metrics;
  std::unique_ptr<Runner> runner;  // after metrics: stopped before they go
};

// An autoregressive model's request defaults: the sampling ones of the server's (the rest are denoising
// settings it refuses).
GenerateParams autoregressive_defaults(const GenerateParams& d) {
  GenerateParams p;
  p.gen_length = d.gen_length;
  p.temperature = d.temperature;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.seed = d.seed;
  return p;
}

// A uniform-state canvas model's request defaults: the server's max_tokens and seed, and the sampler settings
// of the model's generation_config.json (the server's denoising flags are the masked models').
GenerateParams uniform_state_defaults(const GenerateParams& d, const CanvasDecoder& decoder) {
  GenerateParams p;
  p.gen_length = d.gen_length;
  p.seed = d.seed;
  p.uniform_state = decoder.generation_defaults();
  return p;
}

struct Exchange;

class App {
 public:
  App(std::vector<std::unique_ptr<Served>> served, const ServeOptions& o)
      : o_(o), served_(std::move(served)) {
    for (auto& m : served_) {
      // dllm::generate runs an autoregressive or a uniform-state canvas model's jobs whole; the Scheduler
      // batches the masked diffusion models' steps.
      const bool canvas_model = m->model->canvas_decoder() != nullptr;
      if (m->kind == ModelKind::kAutoregressive || canvas_model)
        m->runner = std::make_unique<GenerateScheduler>(*m->model, m->metrics, o.limits, &gate_,
                                                        m->drafter.get(), m->draft);
      else
        m->runner = std::make_unique<Scheduler>(*m->model, m->metrics, o.limits, &gate_);
      targets_.push_back({m->name, m->kind, canvas_model});
    }
  }

  void routes(httplib::Server& s);

  // The lifecycle thread: ends jobs past their deadline (--request-timeout) and, on the first SIGTERM /
  // SIGINT, drains: new requests answer 503 and /health says "draining" while the requests in flight finish
  // (those still running after --drain-seconds are ended with a 503 error), then `server` stops. A second
  // signal stops at once.
  void start_lifecycle(httplib::Server& server);
  void stop_lifecycle();

 private:
  void lifecycle(httplib::Server* server);
  void track(const std::shared_ptr<Job>& job);
  // The live jobs (dropping the ended ones), for the deadline and the drain.
  std::vector<std::shared_ptr<Job>> live_jobs();
  bool draining() const { return draining_.load(); }
  void reply_draining(httplib::Response& res, const std::string& endpoint) {
    res.set_header("Retry-After", "5");
    res.set_header("Connection", "close");
    reply_error(res,
                {503,
                 "the server is shutting down (draining the requests in flight): send this request to "
                 "another replica",
                 "", "server_error", "server_draining"},
                endpoint);
  }

  void reply_error(httplib::Response& res, const ApiError& e, const std::string& endpoint,
                   const json& route = nullptr) {
    res.status = e.status;
    json body = error_body(e);
    if (!route.is_null()) body["dllm"] = {{"route", route}};
    res.set_content(dump(body), "application/json");
    metrics_.count_request(endpoint, e.status);
  }
  void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  // /v1/canvas's answer (the job is queued): a JSON document, or its steps as SSE events then the document.
  void reply_canvas(const std::shared_ptr<Exchange>& x, httplib::Response& res,
                    const std::function<void(int)>& finish_metrics);
  // A non-streamed answer (the job is queued): whitespace while the job runs (a closed connection cancels
  // it), then body() or the job's error, once. on_update (may be empty) sees every step update on the way.
  static void reply_when_done(const std::shared_ptr<Exchange>& x, httplib::Response& res,
                              const std::function<void(int)>& finish_metrics,
                              std::function<void(const StepUpdate&)> on_update,
                              std::function<std::string()> body);
  // Where a canvas edit goes when no model is named: the first masked diffusion model (else the first
  // diffusion one, else the default model: their validation says why not).
  size_t canvas_model() const {
    for (size_t i = 0; i < served_.size(); ++i)
      if (served_[i]->kind == ModelKind::kDiffusion && served_[i]->policy.canvas_length == 0) return i;
    for (size_t i = 0; i < served_.size(); ++i)
      if (served_[i]->kind == ModelKind::kDiffusion) return i;
    return 0;
  }
  json model_json(const Served& m) const;
  json auto_json() const;
  const Served* find(const std::string& name) const {
    for (const auto& m : served_)
      if (m->name == name) return m.get();
    return nullptr;
  }
  std::string names() const {
    std::string out;
    for (const auto& m : served_) out += (out.empty() ? "'" : ", '") + m->name + "'";
    return out + ", 'auto'";
  }

  ServeOptions o_;
  ServerMetrics metrics_;
  std::atomic<bool> draining_{false}, lifecycle_stop_{false};
  std::thread lifecycle_;
  std::mutex live_mu_;
  std::vector<std::weak_ptr<Job>> live_;
  ForwardGate gate_;  // before the runners that share it
  std::vector<std::unique_ptr<Served>> served_;
  std::vector<RouteTarget> targets_;
};

json App::model_json(const Served& m) const {
  const ModelInfo& i = m.model->info();
  const GenerateParams& d = m.policy.defaults;
  json defaults = {{"max_tokens", d.gen_length}, {"temperature", d.temperature}};
  if (m.policy.canvas_length > 0) {  // its sampler's settings (no temperature: a schedule)
    const UniformStateParams& u = d.uniform_state;
    defaults = {{"max_tokens", d.gen_length},
                {"max_denoising_steps", *u.max_denoising_steps},
                {"t_min", *u.t_min},
                {"t_max", *u.t_max},
                {"entropy_bound", *u.entropy_bound},
                {"stability_threshold", *u.stability_threshold},
                {"confidence_threshold", *u.confidence_threshold}};
  } else if (m.kind == ModelKind::kDiffusion) {
    defaults["steps"] = d.steps;
    defaults["block_length"] = d.block_length;
    defaults["threshold"] = d.transfer == Transfer::kThreshold ? json(d.threshold) : json(nullptr);
    defaults["cfg_scale"] = d.cfg_scale;
  }
  json model = {{"id", m.name},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "dllm"},
                {"dllm",
                 {{"kind", kind_name(m.kind)},
                  {"default", &m == served_.front().get()},
                  {"architecture", i.architecture},
                  {"tokenizer", m.codec.kind()},
                  {"chat_template", m.codec.chat_template() != nullptr},
                  {"vocab_size", i.vocab_size},
                  {"max_seq_len", i.max_seq_len},
                  {"n_params", i.n_params},
                  {"mask_id", m.codec.mask_id()},
                  {"block_size", i.block_size},
                  {"canvas_length", m.policy.canvas_length},
                  {"defaults", defaults},
                  {"limits", {{"max_tokens", m.policy.max_tokens}, {"max_n", m.policy.max_n}}}}}};
  if (m.drafter)
    model["dllm"]["draft"] = {{"model", m.drafter->info().path},
                              {"tokens", m.draft.tokens},
                              {"steps", m.draft.steps},
                              {"cache", m.draft.cache ? "prefix" : "none"}};
  if (!m.codec.tokenizer_error().empty()) model["dllm"]["tokenizer_error"] = m.codec.tokenizer_error();
  return model;
}

json App::auto_json() const {
  json models = json::array();
  for (const auto& t : targets_) models.push_back({{"id", t.name}, {"kind", kind_name(t.kind)}});
  return {{"id", std::string(kAutoModel)},
          {"object", "model"},
          {"created", 0},
          {"owned_by", "dllm"},
          {"dllm",
           {{"kind", "router"},
            {"models", models},
            {"policy",
             {{"short_max_tokens", o_.router.short_max_tokens},
              {"keywords", o_.router.keywords},
              {"reasons", [] {
                 json r = json::array();
                 for (RouteReason x : all_route_reasons()) r.push_back(reason_name(x));
                 return r;
               }()}}}}}};
}

void App::routes(httplib::Server& s) {
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (o_.api_key.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const bool open = req.path == "/" || req.path == "/health" || req.path.rfind("/static/", 0) == 0;
    if (open || req.method == "OPTIONS") return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + o_.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    e.status = 401;
    e.message = req.has_header("Authorization") ? "invalid API key"
                                                : "missing API key: send 'Authorization: Bearer KEY'";
    e.code = "invalid_api_key";
    reply_error(res, e, req.path);
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.status = res.status;
    if (res.status == 404)
      e.message = "no route " + req.method + " " + req.path;
    else if (res.status == 413)
      e.message =
          "the request body is over this server's limit of " + std::to_string(o_.max_body_bytes) + " bytes";
    else if (res.status == 405)
      e.message = "method " + req.method + " is not allowed on " + req.path;
    else
      e.message = "HTTP " + std::to_string(res.status);
    res.set_content(dump(error_body(e)), "application/json");
    metrics_.count_request(req.path, res.status);
  });
  s.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      e.message = ex.what();
    } catch (...) {
      e.message = "unknown error";
    }
    reply_error(res, e, req.path);
  });

  s.Get("/", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(web_index_html()), "text/html; charset=utf-8");
    metrics_.count_request("/", 200);
  });
  s.Get("/static/app.js", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(web_app_js()), "text/javascript; charset=utf-8");
  });
  s.Get("/static/style.css", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(web_style_css()), "text/css; charset=utf-8");
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    json models = json::array();
    int64_t queued = 0, active = 0;
    for (const auto& m : served_) {
      const int64_t q = m->metrics.queue_depth.load(), a = m->metrics.active_requests.load();
      queued += q;
      active += a;
      // Cold start: a replica's load, then its first request's first token (the first denoised canvas; for
      // an autoregressive model the first token): together what a new replica costs before it answers.
      const double first = m->metrics.first_request_first_step_seconds.load();
      json cold = {
          {"load_seconds", m->load_seconds},
          {"weights_prepared", m->model->weights_prepared()},
          {"first_request_first_token_seconds", first >= 0 ? json(first) : json(nullptr)},
          {"load_to_first_token_seconds", first >= 0 ? json(m->load_seconds + first) : json(nullptr)}};
      models.push_back({{"id", m->name},
                        {"kind", kind_name(m->kind)},
                        {"queue_depth", q},
                        {"active_requests", a},
                        {"cold_start", cold}});
    }
    if (draining()) res.status = 503;  // a load balancer's health check takes the replica out
    json h = {{"status", draining() ? "draining" : "ok"},
              {"model", served_.front()->name},
              {"models", models},
              {"queue_depth", queued},
              {"active_requests", active}};
    res.set_content(dump(h), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::vector<ModelMetricsView> views;
    for (const auto& m : served_)
      views.push_back({m->name, kind_name(m->kind), m->model->info().architecture, &m->metrics});
    res.set_content(metrics_.render(views), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json data = json::array();
    for (const auto& m : served_) data.push_back(model_json(*m));
    data.push_back(auto_json());
    res.set_content(dump(json({{"object", "list"}, {"data", data}})), "application/json");
    metrics_.count_request("/v1/models", 200);
  });
  s.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id == kAutoModel) return res.set_content(dump(auto_json()), "application/json");
    const Served* m = find(id);
    if (!m) {
      ApiError e{404, "unknown model '" + id + "'; this server serves " + names(), "model",
                 "invalid_request_error", "model_not_found"};
      return reply_error(res, e, "/v1/models");
    }
    res.set_content(dump(model_json(*m)), "application/json");
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, Endpoint::kCompletions);
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, Endpoint::kChat);
  });
  s.Post("/v1/canvas", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, Endpoint::kCanvas);
  });
}

// Per-request state shared by the content provider calls.
struct Exchange {
  std::shared_ptr<Job> job;
  GenRequest request;
  ResponseMeta meta;
  std::vector<PrefixStream> streams;
  std::string endpoint;
  Served* served = nullptr;
  json route;  // dllm.route of the answer
  bool finished = false;
  int64_t prompt_tokens() const {
    return static_cast<int64_t>(request.prompt.size() + request.suffix.size());
  }
};

void App::generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  const std::string name = endpoint == Endpoint::kChat     ? "/v1/chat/completions"
                           : endpoint == Endpoint::kCanvas ? "/v1/canvas"
                                                           : "/v1/completions";
  if (draining()) return reply_draining(res, name);
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::exception& e) {
    return reply_error(res,
                       {400, std::string("the request body is not valid JSON: ") + e.what(), "",
                        "invalid_request_error", ""},
                       name);
  }
  // Which model: the one named, the router's choice for "auto", or the default (first) one. A `model` of the
  // wrong type goes to the default model, whose validation names the field.
  RouteDecision decision;
  decision.reason = RouteReason::kDefault;
  decision.detail = "no model named -> the default model";
  const auto model_field = body.is_object() ? body.find("model") : body.end();
  if (body.is_object() && model_field != body.end() && model_field->is_string()) {
    const std::string wanted = model_field->get<std::string>();
    if (wanted == kAutoModel && endpoint == Endpoint::kCanvas) {
      decision.model = canvas_model();
      decision.reason = RouteReason::kInfill;
      decision.detail = "a canvas edit: infill in context -> the first diffusion model";
    } else if (wanted == kAutoModel) {
      decision = route(route_features(body, endpoint == Endpoint::kChat, o_.policy.defaults.gen_length),
                       targets_, o_.router);
    } else {
      decision.model = served_.size();
      for (size_t i = 0; i < served_.size(); ++i)
        if (served_[i]->name == wanted) decision.model = i;
      if (decision.model == served_.size())
        return reply_error(res,
                           {400, "unknown model '" + wanted + "'; this server serves " + names(), "model",
                            "invalid_request_error", "model_not_found"},
                           name);
      decision.reason = RouteReason::kRequested;
      decision.detail = "named in the request";
    }
  }
  if (endpoint == Endpoint::kCanvas && decision.reason == RouteReason::kDefault) {
    decision.model = canvas_model();
    decision.detail = "no model named -> the first diffusion model";
  }
  Served& m = *served_[decision.model];
  const json route = route_json(decision, targets_);
  // Errors of a request the router placed say where it went (in the message and as dllm.route).
  const bool routed = decision.reason != RouteReason::kRequested && decision.reason != RouteReason::kDefault;
  const json route_if_auto = routed ? route : json(nullptr);

  auto x = std::make_shared<Exchange>();
  x->route = route;
  if (auto err = parse_request(body, endpoint, m.codec, m.model->info(), m.policy, x->request)) {
    if (routed) err->message += " (model \"auto\" chose '" + m.name + "': " + decision.detail + ")";
    return reply_error(res, *err, name, route_if_auto);
  }
  const GenRequest& r = x->request;
  const Updates updates = !r.stream ? Updates::kNone : (r.diffusing ? Updates::kAll : Updates::kLatest);
  if (m.kind == ModelKind::kAutoregressive) {
    x->job = std::make_shared<Job>(std::vector<std::vector<int32_t>>(r.n, r.prompt), r.params, updates);
  } else if (m.policy.canvas_length > 0) {
    // A uniform-state canvas model: the n choices denoised as one batch by dllm::generate; whole canvases
    // run, the answer is their first max_tokens tokens.
    x->job = std::make_shared<Job>(std::vector<std::vector<int32_t>>(r.n, r.prompt), r.params, updates,
                                   PromptRows::kBatched, Window{0, r.params.gen_length});
  } else {
    std::unique_ptr<DenoiseLoop> denoiser;
    Window window;
    try {
      if (endpoint == Endpoint::kCanvas) {
        // The whole canvas is the answer's window; every step is kept (a refine round's changes are counted
        // from its events).
        const CanvasEdit edit{r.doc.ids, r.doc.editable, r.doc.rounds, r.doc.tokens_per_round};
        denoiser = make_canvas_edit_loop(m.model->info(), edit, r.params);
      } else if (r.infill) {
        // prompt + max_tokens masks + suffix; the answer is the masks' window.
        const int32_t mask = r.params.mask_id >= 0 ? r.params.mask_id : m.model->info().mask_id;
        std::vector<int32_t> canvas = r.prompt;
        canvas.insert(canvas.end(), r.params.gen_length, mask);
        canvas.insert(canvas.end(), r.suffix.begin(), r.suffix.end());
        denoiser =
            make_denoise_loop(m.model->info(), std::vector<std::vector<int32_t>>(r.n, canvas), r.params,
                              /*infill=*/true);
        window = {static_cast<int64_t>(r.prompt.size()), r.params.gen_length};
      } else {
        // Bidirectional families: one Denoiser for the n choices; block-diffusion ones: a BlockDenoiser per
        // choice, one after another (each seeded by its choice index).
        denoiser =
            make_denoise_loop(m.model->info(), std::vector<std::vector<int32_t>>(r.n, r.prompt), r.params);
      }
    } catch (const std::exception& e) {
      return reply_error(res, {400, e.what(), param_of(e.what(), body), "invalid_request_error", ""}, name,
                         route_if_auto);
    }
    x->job = std::make_shared<Job>(std::move(denoiser),
                                   endpoint == Endpoint::kCanvas ? Updates::kAll : updates, window);
  }
  x->meta = make_meta(endpoint, m.name);
  x->endpoint = name;
  x->served = &m;
  // SDAR's output ends after a stop id (kept in the text unless it is an end token).
  const ModelInfo& info = m.model->info();
  const bool sdar =
      info.block_size > 0 && (r.params.block_loop == BlockLoop::kSdar ||
                              (r.params.block_loop == BlockLoop::kDefault && info.architecture == "sdar"));
  for (int i = 0; i < r.n; ++i) {
    x->streams.emplace_back(m.codec, r.stop, r.params.mask_id, r.params.eos_id);
    if (sdar && r.params.stop_ids) x->streams.back().stop_after(*r.params.stop_ids);
    if (!r.end_ids.empty()) x->streams.back().end_at(r.end_ids);
  }
  if (o_.request_timeout_seconds > 0)
    x->job->deadline = x->job->arrived + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(o_.request_timeout_seconds));
  if (!m.runner->submit(x->job)) {
    // A hint, not a promise: about one request's time per batch of queued requests ahead.
    const double mean = m.metrics.request_seconds.mean();
    const double wait =
        std::clamp((mean > 0 ? mean : 1.0) *
                       (1.0 + static_cast<double>(o_.limits.max_queue) /
                                  static_cast<double>(std::max<int64_t>(1, o_.limits.max_batch_rows))),
                   1.0, 600.0);
    res.set_header("Retry-After", std::to_string(static_cast<int64_t>(std::ceil(wait))));
    ApiError e{429,
               "the request queue is full (" + std::to_string(o_.limits.max_queue) + " waiting for '" +
                   m.name + "'); retry later",
               "", "rate_limit_exceeded", "queue_full"};
    return reply_error(res, e, name, route_if_auto);
  }
  track(x->job);
  m.metrics.prompt_tokens += x->prompt_tokens() * r.n;
  metrics_.count_route(m.name, reason_name(decision.reason));  // an accepted request

  auto finish_metrics = [this, x](int status) {
    if (x->finished) return;
    x->finished = true;
    metrics_.count_request(x->endpoint, status);
    Metrics& mm = x->served->metrics;
    mm.request_seconds.observe(std::chrono::duration<double>(Clock::now() - x->job->arrived).count());
    for (const auto& s : x->streams) mm.completion_tokens += s.tokens();
  };
  if (endpoint == Endpoint::kCanvas) return reply_canvas(x, res, finish_metrics);
  auto stats = [x]() {
    const GenerateResult& g = x->job->result();
    return json{{"forwards", g.forwards},
                {"steps", g.forwards},
                {"forward_tokens", g.forward_tokens},
                {"seconds", g.seconds},
                {"queue_seconds", std::chrono::duration<double>(x->job->started - x->job->arrived).count()},
                {"route", x->route}};
  };

  if (!r.stream)
    return reply_when_done(x, res, finish_metrics, {}, [x, stats]() {
      std::vector<ChoiceResult> choices;
      const auto& outputs = x->job->result().outputs;
      for (size_t i = 0; i < x->streams.size() && i < outputs.size(); ++i) {
        PrefixStream& s = x->streams[i];
        s.advance(outputs[i], /*final=*/true);
        choices.push_back({s.text(), s.stopped() ? "stop" : "length", s.tokens()});
      }
      return dump(full_response(x->meta, choices, x->prompt_tokens(), stats()));
    });

  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, x, finish_metrics](size_t, httplib::DataSink& sink) {
        auto written = Clock::now();  // the last write: a closed connection shows only on a write
        auto put = [&](const std::string& s) {
          written = Clock::now();
          return sink.write(s.data(), s.size());
        };
        auto fail = [&] {
          x->job->cancel();
          return false;
        };
        const int n = static_cast<int>(x->streams.size());
        std::vector<uint8_t> closed(n, 0);
        // The first chunk carries the route (chat: with the role of choice 0; completions: an empty text).
        const bool chat = x->meta.endpoint == Endpoint::kChat;
        for (int i = 0; i < (chat ? n : 1); ++i) {
          json chunk = text_chunk(x->meta, i, "", "", /*role_only=*/chat);
          if (i == 0) chunk["dllm"] = {{"route", x->route}};
          if (!put(sse(chunk))) return fail();
        }
        auto close_row = [&](int i) {
          const PrefixStream& s = x->streams[i];
          closed[i] = 1;
          return put(sse(text_chunk(x->meta, i, "", s.stopped() ? "stop" : "length")));
        };
        for (;;) {
          Job::News news = x->job->wait(kHeartbeat);
          if (news.updates.empty() && !news.ended) {
            if (!put(": keep-alive\n\n")) return fail();
            continue;
          }
          for (const StepUpdate& u : news.updates) {
            if (x->request.diffusing) {
              const double ms =
                  std::chrono::duration<double, std::milli>(Clock::now() - x->job->started).count();
              if (!put(sse(diffusion_chunk(x->meta, x->served->codec, u, x->request.mask_placeholder, ms,
                                           x->request.params.mask_id))))
                return fail();
            }
            for (int i = 0; i < n && i < static_cast<int>(u.canvas.size()); ++i) {
              if (closed[i]) continue;
              // Only the final prefix: LLaDA2.1 may still edit the tokens of its current block.
              const int64_t final_prefix =
                  i < static_cast<int>(u.final_prefix.size()) ? u.final_prefix[i] : -1;
              const std::string delta = x->streams[i].advance(u.canvas[i], false, final_prefix);
              if (!delta.empty() && !put(sse(text_chunk(x->meta, i, delta, "")))) return fail();
              if (x->streams[i].done() && !close_row(i)) return fail();
            }
          }
          // Steps that bring no text (a DiffusionGemma canvas's text comes when it is committed) still let a
          // client that went away be seen within a heartbeat or two.
          if (!news.ended && Clock::now() - written >= kHeartbeat && !put(": keep-alive\n\n")) return fail();
          // Every choice has its text (an end token or stop string reached): the rest of the canvas is unused
          // (a diffusing client watches the canvas to its end).
          if (!news.ended && !x->request.diffusing &&
              std::all_of(closed.begin(), closed.end(), [](uint8_t c) { return c != 0; }))
            x->job->cancel();
          if (!news.ended) continue;
          if (x->job->error()) {
            finish_metrics(x->job->error_status());
            put(sse(error_body(job_error(*x->job))));
            put("data: [DONE]\n\n");
            sink.done();
            return true;
          }
          const auto& outputs = x->job->result().outputs;
          int64_t completion = 0;
          for (int i = 0; i < n; ++i) {
            if (!closed[i] && i < static_cast<int>(outputs.size())) {
              const std::string delta = x->streams[i].advance(outputs[i], /*final=*/true);
              if (!delta.empty() && !put(sse(text_chunk(x->meta, i, delta, "")))) return fail();
            }
            if (!closed[i] && !close_row(i)) return fail();
            completion += x->streams[i].tokens();
          }
          if (x->request.include_usage && !put(sse(usage_chunk(x->meta, x->prompt_tokens(), completion))))
            return fail();
          finish_metrics(200);
          if (!put("data: [DONE]\n\n")) return fail();
          sink.done();
          return true;
        }
      },
      [x, finish_metrics](bool success) {
        if (!success) x->job->cancel();
        finish_metrics(success ? 200 : 499);
      });
}

void App::track(const std::shared_ptr<Job>& job) {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_.push_back(job);
}

std::vector<std::shared_ptr<Job>> App::live_jobs() {
  std::lock_guard<std::mutex> lock(live_mu_);
  std::vector<std::shared_ptr<Job>> out;
  std::vector<std::weak_ptr<Job>> kept;
  for (auto& w : live_)
    if (auto j = w.lock(); j && !j->ended()) {
      out.push_back(j);
      kept.push_back(w);
    }
  live_ = std::move(kept);
  return out;
}

void App::start_lifecycle(httplib::Server& server) {
  lifecycle_ = std::thread([this, &server] { lifecycle(&server); });
}

void App::stop_lifecycle() {
  lifecycle_stop_ = true;
  if (lifecycle_.joinable()) lifecycle_.join();
}

void App::lifecycle(httplib::Server* server) {
  Clock::time_point drain_end{};
  int signals = 0;
  while (!lifecycle_stop_) {
    pollfd p{g_signal_pipe[0], POLLIN, 0};
    if (g_signal_pipe[0] >= 0 && poll(&p, 1, 100) > 0 && (p.revents & POLLIN)) {
      char buf[16];
      const ssize_t n = read(g_signal_pipe[0], buf, sizeof buf);
      signals += n > 0 ? static_cast<int>(n) : 0;
      if (signals >= 2) {  // a second signal: stop now
        for (auto& j : live_jobs()) j->cancel_with_error("the server stopped", 503, "server_stopped");
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        server->stop();
        return;
      }
      if (!draining_) {
        draining_ = true;
        metrics_.draining = true;
        drain_end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(o_.drain_seconds));
        if (!o_.quiet)
          std::fprintf(stderr, "dllm serve: draining (%zu requests in flight, up to %.0f s)\n",
                       live_jobs().size(), o_.drain_seconds);
      }
    } else if (g_signal_pipe[0] < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const Clock::time_point now = Clock::now();
    std::vector<std::shared_ptr<Job>> live = live_jobs();
    for (auto& j : live)
      if (j->deadline != Clock::time_point{} && now > j->deadline && !j->cancelled()) {
        j->cancel_with_error("the request ran past this server's --request-timeout of " +
                                 std::to_string(o_.request_timeout_seconds) + " s and was stopped",
                             504, "request_timeout");
        ++metrics_.timed_out;
      }
    if (!draining_) continue;
    if (now >= drain_end)
      for (auto& j : live)
        j->cancel_with_error("the server is shutting down: --drain-seconds ran out before this request ended",
                             503, "server_draining");
    if (live.empty()) {
      // The answers of the last jobs are being written by their handlers: the server's stop waits for them.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!o_.quiet) std::fprintf(stderr, "dllm serve: drained\n");
      server->stop();
      return;
    }
  }
}

void App::reply_when_done(const std::shared_ptr<Exchange>& x, httplib::Response& res,
                          const std::function<void(int)>& finish_metrics,
                          std::function<void(const StepUpdate&)> on_update,
                          std::function<std::string()> body) {
  res.set_chunked_content_provider(
      "application/json",
      [x, finish_metrics, on_update = std::move(on_update), body = std::move(body)](size_t,
                                                                                    httplib::DataSink& sink) {
        for (;;) {
          Job::News news = x->job->wait(kHeartbeat);
          if (on_update)
            for (const StepUpdate& u : news.updates) on_update(u);
          if (!news.ended) {
            // Whitespace before the JSON value keeps the body valid and tells a closed connection apart.
            if (!sink.write(" ", 1)) {
              x->job->cancel();
              return false;
            }
            continue;
          }
          std::string out = x->job->error() ? dump(error_body(job_error(*x->job))) : body();
          finish_metrics(x->job->error() ? x->job->error_status() : 200);
          out += "\n";
          const bool ok = sink.write(out.data(), out.size());
          if (ok) sink.done();
          return ok;
        }
      },
      [x, finish_metrics](bool success) {
        if (!success) x->job->cancel();
        finish_metrics(success ? 200 : 499);
      });
}

void App::reply_canvas(const std::shared_ptr<Exchange>& x, httplib::Response& res,
                       const std::function<void(int)>& finish_metrics) {
  const GenRequest& r = x->request;
  const int64_t editable = std::count(r.doc.editable.begin(), r.doc.editable.end(), 1);
  // Bidirectional models remask k tokens per round; block-diffusion ones run editing passes (no k).
  const bool passes = x->served->model->info().block_size > 0;
  const int64_t k = refine_tokens_per_round(editable, r.doc.tokens_per_round);
  // Per refine round: the tokens it changed (a bidirectional round's last event lists its remasked tokens
  // that came back different; a block model's editing pass r lists its edits at every step).
  auto changed = std::make_shared<std::vector<int64_t>>(r.doc.rounds, 0);
  auto note = [changed](const StepUpdate& u) {
    if (u.block > 0 && u.block <= static_cast<int64_t>(changed->size()) && !u.edited.empty())
      (*changed)[u.block - 1] += static_cast<int64_t>(u.edited[0].size());
  };
  auto document = [this, x, changed, editable, k, passes]() {
    const GenRequest& r = x->request;
    const GenerateResult& g = x->job->result();
    const std::vector<int32_t>& canvas = g.outputs.empty() ? r.doc.ids : g.outputs[0];
    json out = canvas_document(x->served->codec, r.doc, canvas, r.mask_placeholder, r.params.mask_id);
    json rounds = json::array();
    for (size_t i = 0; i < changed->size(); ++i)
      rounds.push_back(passes ? json{{"round", i + 1}, {"changed", (*changed)[i]}}
                              : json{{"round", i + 1}, {"remasked", k}, {"changed", (*changed)[i]}});
    const int64_t context = static_cast<int64_t>(r.doc.ids.size()) - editable;
    json head = {
        {"id", x->meta.id}, {"object", "canvas"}, {"created", x->meta.created}, {"model", x->meta.model}};
    head.update(out);
    head["refine"] = rounds;
    head["usage"] = usage_json(context, editable);
    head["dllm"] = {
        {"forwards", g.forwards},
        {"forward_tokens", g.forward_tokens},
        {"seconds", g.seconds},
        {"cancelled", g.cancelled},
        {"queue_seconds", std::chrono::duration<double>(x->job->started - x->job->arrived).count()},
        {"route", x->route}};
    return head;
  };
  auto error_text = [x]() { return dump(error_body(job_error(*x->job))); };
  if (!r.stream)
    return reply_when_done(x, res, finish_metrics, note, [document]() { return dump(document()); });
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [x, note, document, error_text, finish_metrics](size_t, httplib::DataSink& sink) {
        auto put = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
        auto fail = [&] {
          x->job->cancel();
          return false;
        };
        const GenRequest& r = x->request;
        for (;;) {
          Job::News news = x->job->wait(kHeartbeat);
          if (news.updates.empty() && !news.ended) {
            if (!put(": keep-alive\n\n")) return fail();
            continue;
          }
          for (const StepUpdate& u : news.updates) {
            note(u);
            if (!r.diffusing || u.canvas.empty()) continue;
            const double ms =
                std::chrono::duration<double, std::milli>(Clock::now() - x->job->started).count();
            json step = canvas_document(x->served->codec, r.doc, u.canvas[0], r.mask_placeholder,
                                        r.params.mask_id, &u);
            step["round"] = u.block;
            step["step"] = u.step;
            step["forwards"] = u.forwards;
            step["elapsed_ms"] = ms;
            json chunk = {{"id", x->meta.id},
                          {"object", "canvas.chunk"},
                          {"created", x->meta.created},
                          {"model", x->meta.model},
                          {"dllm", std::move(step)}};
            if (!put(sse(chunk))) return fail();
          }
          if (!news.ended) continue;
          finish_metrics(x->job->error() ? x->job->error_status() : 200);
          if (!put(x->job->error() ? "data: " + error_text() + "\n\n" : sse(document()))) return fail();
          if (!put("data: [DONE]\n\n")) return fail();
          sink.done();
          return true;
        }
      },
      [x, finish_metrics](bool success) {
        if (!success) x->job->cancel();
        finish_metrics(success ? 200 : 499);
      });
}

}  // namespace

int serve(const std::vector<ModelSpec>& models, const ServeOptions& options) {
  std::unique_ptr<App> app;
  std::string listing;
  try {
    if (models.empty()) fail("no model to serve");
    std::vector<std::unique_ptr<Served>> served;
    for (const ModelSpec& spec : models) {
      if (spec.name.empty() || spec.name == kAutoModel)
        fail("a served model cannot be named '", spec.name, "' ('auto' is the router)");
      for (const auto& other : served)
        if (other->name == spec.name)
          fail("two models are named '", spec.name, "': name them with --model NAME=PATH");
      auto m = std::make_unique<Served>();
      m->name = spec.name;
      m->model = spec.model;
      m->load_seconds = spec.load_seconds;
      m->drafter = spec.drafter;
      m->draft = spec.draft;
      const ModelInfo& model_info = spec.model->info();
      m->kind = model_info.autoregressive ? ModelKind::kAutoregressive : ModelKind::kDiffusion;
      m->policy = options.policy;
      m->policy.model_id = spec.name;
      ModelInfo info = model_info;
      if (m->kind == ModelKind::kAutoregressive) {
        m->policy.defaults = autoregressive_defaults(options.policy.defaults);
      } else if (const CanvasDecoder* decoder = spec.model->canvas_decoder()) {
        m->policy.defaults = uniform_state_defaults(options.policy.defaults, *decoder);
        m->policy.canvas_length = decoder->canvas_length();
      } else {
        // The codec's mask / EOS ids: the model's with --mask-id / --eos-id put in (a model whose files name
        // no mask id, as the tiny LLaDA2 one, is served with --mask-id; without one, requests must give
        // mask_id).
        try {
          info = with_token_overrides(info, options.policy.defaults);
        } catch (const Error&) {
          if (options.policy.defaults.mask_id >= 0 || options.policy.defaults.eos_id >= 0) throw;
        }
      }
      const std::string tok_dir = spec.tokenizer_dir.empty() ? spec.path : spec.tokenizer_dir;
      m->codec = spec.tokenizer_dir.empty() ? TextCodec::load_if_present(tok_dir, info)
                                            : TextCodec::load(tok_dir, info);
      if (!m->codec.tokenizer_error().empty())
        // (The message names the model's file.)
        std::fprintf(stderr, "dllm serve: warning: %s; only token-id prompts can be served\n",
                     m->codec.tokenizer_error().c_str());
      if (!options.quiet)
        std::fprintf(stderr, "dllm serve: '%s' (%s, %s): text codec: %s%s\n", spec.name.c_str(),
                     kind_name(m->kind), model_info.architecture.c_str(), m->codec.kind().c_str(),
                     m->codec.chat_template() ? " + chat template" : "");
      listing += (listing.empty() ? "'" : ", '") + spec.name + "'";
      if (models.size() > 1) listing += std::string(" ") + kind_name(m->kind);
      served.push_back(std::move(m));
    }
    app = std::make_unique<App>(std::move(served), options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dllm serve: %s\n", e.what());
    return 1;
  }
  httplib::Server server;
  const size_t threads =
      static_cast<size_t>((options.limits.max_queue + options.limits.max_batch_rows) * models.size() + 16);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(options.max_body_bytes);
  server.set_keep_alive_timeout(2);
  server.set_read_timeout(30);
  server.set_write_timeout(30);
  app->routes(server);

  int port = options.port;
  if (port == 0) {
    port = server.bind_to_any_port(options.host);
    if (port <= 0) {
      std::fprintf(stderr, "dllm serve: cannot bind %s on any port\n", options.host.c_str());
      return 1;
    }
  } else if (!server.bind_to_port(options.host, port)) {
    std::fprintf(stderr, "dllm serve: cannot bind %s:%d (in use, or not an address of this machine)\n",
                 options.host.c_str(), port);
    return 1;
  }
  std::signal(SIGPIPE, SIG_IGN);
  if (pipe(g_signal_pipe) != 0) {
    std::fprintf(stderr, "dllm serve: pipe(2) failed: %s\n", std::strerror(errno));
    return 1;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  app->start_lifecycle(server);
  std::fprintf(stderr, "dllm serve: listening on http://%s:%d (%s %s%s)\n", options.host.c_str(), port,
               models.size() > 1 ? "models" : "model", listing.c_str(),
               models.size() > 1 ? ", and 'auto'" : "");
  std::fflush(stderr);
  server.listen_after_bind();
  app->stop_lifecycle();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!options.quiet) std::fprintf(stderr, "dllm serve: stopped\n");
  return 0;
}

}  // namespace dllm::server
