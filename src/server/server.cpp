#include "server/server.h"

#include <httplib.h>

#include <csignal>
#include <cstring>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "server/responses.h"
#include "server/text_codec.h"
#include "server/web_assets.h"

namespace dllm::server {
namespace {

using nlohmann::json;

httplib::Server* g_server = nullptr;

void on_signal(int) {
  if (g_server) g_server->stop();  // shutdown(2) + close(2) of the listening socket: async-signal-safe
}

constexpr auto kHeartbeat = std::chrono::milliseconds(1000);

// The request field a DenoiseLoop validation message is about (its messages name GenerateParams fields): the
// name that occurs first in the message, among the fields the request gave when one of them occurs (a message
// may name another field in passing: "remasking is ... (the threshold goes with ...)"); at one position the
// longer name ("editing_threshold" holds "threshold").
std::string param_of(const std::string& message, const json& body) {
  static const char* const kFields[] = {
      "editing_threshold", "max_post_steps", "num_to_transfer", "minimal_topk", "stop_at_eos", "eos_early_stop",
      "mask_id", "eos_id", "block_length", "steps", "threshold", "factor", "top_p", "top_k", "cfg_scale",
      "temperature", "alg_temp", "cache", "remasking", "unmask", "alg", "schedule", "sampler"};
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

class App {
 public:
  App(std::shared_ptr<Model> model, TextCodec codec, const ServeOptions& o)
      : model_(std::move(model)), codec_(std::move(codec)), o_(o), scheduler_(*model_, metrics_, o.limits) {}

  void routes(httplib::Server& s);

 private:
  void reply_error(httplib::Response& res, const ApiError& e, const std::string& endpoint) {
    res.status = e.status;
    res.set_content(dump(error_body(e)), "application/json");
    metrics_.count_request(endpoint, e.status);
  }
  void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  json models_json() const;

  std::shared_ptr<Model> model_;
  TextCodec codec_;
  ServeOptions o_;
  Metrics metrics_;
  Scheduler scheduler_;
};

json App::models_json() const {
  const ModelInfo& i = model_->info();
  const GenerateParams& d = o_.policy.defaults;
  json model = {{"id", o_.policy.model_id},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "dllm"},
                {"dllm",
                 {{"architecture", i.architecture},
                  {"tokenizer", codec_.kind()},
                  {"chat_template", codec_.chat_template() != nullptr},
                  {"vocab_size", i.vocab_size},
                  {"max_seq_len", i.max_seq_len},
                  {"n_params", i.n_params},
                  {"mask_id", codec_.mask_id()},
                  {"block_size", i.block_size},
                  {"defaults",
                   {{"max_tokens", d.gen_length},
                    {"steps", d.steps},
                    {"block_length", d.block_length},
                    {"threshold", d.transfer == Transfer::kThreshold ? json(d.threshold) : json(nullptr)},
                    {"temperature", d.temperature},
                    {"cfg_scale", d.cfg_scale}}},
                  {"limits", {{"max_tokens", o_.policy.max_tokens}, {"max_n", o_.policy.max_n}}}}}};
  if (!codec_.tokenizer_error().empty()) model["dllm"]["tokenizer_error"] = codec_.tokenizer_error();
  return model;
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
    json h = {{"status", "ok"},
              {"model", o_.policy.model_id},
              {"queue_depth", metrics_.queue_depth.load()},
              {"active_requests", metrics_.active_requests.load()}};
    res.set_content(dump(h), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(json({{"object", "list"}, {"data", json::array({models_json()})}})),
                    "application/json");
    metrics_.count_request("/v1/models", 200);
  });
  s.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != o_.policy.model_id) {
      ApiError e{404, "unknown model '" + std::string(req.matches[1]) + "'", "model", "invalid_request_error",
                 "model_not_found"};
      return reply_error(res, e, "/v1/models");
    }
    res.set_content(dump(models_json()), "application/json");
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, Endpoint::kCompletions);
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, Endpoint::kChat);
  });
}

// Per-request state shared by the content provider calls.
struct Exchange {
  std::shared_ptr<Job> job;
  GenRequest request;
  ResponseMeta meta;
  std::vector<PrefixStream> streams;
  std::string endpoint;
  bool finished = false;
};

void App::generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  const std::string name = endpoint == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::exception& e) {
    return reply_error(res,
                       {400, std::string("the request body is not valid JSON: ") + e.what(), "",
                        "invalid_request_error", ""},
                       name);
  }
  auto x = std::make_shared<Exchange>();
  if (auto err = parse_request(body, endpoint, codec_, model_->info(), o_.policy, x->request))
    return reply_error(res, *err, name);
  const GenRequest& r = x->request;
  std::unique_ptr<DenoiseLoop> denoiser;
  try {
    // Bidirectional families: one Denoiser for the n choices; block-diffusion ones: a BlockDenoiser per
    // choice, one after another (each seeded by its choice index).
    denoiser = make_denoise_loop(model_->info(), std::vector<std::vector<int32_t>>(r.n, r.prompt), r.params);
  } catch (const std::exception& e) {
    return reply_error(res, {400, e.what(), param_of(e.what(), body), "invalid_request_error", ""}, name);
  }
  const Updates updates = !r.stream ? Updates::kNone : (r.diffusing ? Updates::kAll : Updates::kLatest);
  x->job = std::make_shared<Job>(std::move(denoiser), updates);
  x->meta = make_meta(endpoint, o_.policy.model_id);
  x->endpoint = name;
  // SDAR's output ends after a stop id (kept in the text unless it is an end token).
  const bool sdar = model_->info().block_size > 0 &&
                    (r.params.block_loop == BlockLoop::kSdar ||
                     (r.params.block_loop == BlockLoop::kDefault && model_->info().architecture == "sdar"));
  for (int i = 0; i < r.n; ++i) {
    x->streams.emplace_back(codec_, r.stop, r.params.mask_id, r.params.eos_id);
    if (sdar && r.params.stop_ids) x->streams.back().stop_after(*r.params.stop_ids);
  }
  if (!scheduler_.submit(x->job)) {
    ApiError e{429,
               "the request queue is full (" + std::to_string(o_.limits.max_queue) + " waiting); retry later",
               "", "rate_limit_exceeded", "queue_full"};
    return reply_error(res, e, name);
  }
  metrics_.prompt_tokens += r.prompt.size() * r.n;

  auto finish_metrics = [this, x](int status) {
    if (x->finished) return;
    x->finished = true;
    metrics_.count_request(x->endpoint, status);
    metrics_.request_seconds.observe(std::chrono::duration<double>(Clock::now() - x->job->arrived).count());
    for (const auto& s : x->streams) metrics_.completion_tokens += s.tokens();
  };
  auto stats = [x]() {
    const GenerateResult& g = x->job->result();
    return json{{"forwards", g.forwards},
                {"steps", g.forwards},
                {"forward_tokens", g.forward_tokens},
                {"seconds", g.seconds},
                {"queue_seconds", std::chrono::duration<double>(x->job->started - x->job->arrived).count()}};
  };

  if (!r.stream) {
    res.set_chunked_content_provider(
        "application/json",
        [this, x, finish_metrics, stats](size_t, httplib::DataSink& sink) {
          for (;;) {
            Job::News news = x->job->wait(kHeartbeat);
            if (!news.ended) {
              // Whitespace before the JSON value keeps the body valid and tells a closed connection apart.
              if (!sink.write(" ", 1)) {
                x->job->cancel();
                return false;
              }
              continue;
            }
            std::string out;
            if (x->job->error()) {
              ApiError e{500, *x->job->error(), "", "server_error", ""};
              out = dump(error_body(e));
              ++metrics_.failed;
            } else {
              std::vector<ChoiceResult> choices;
              const auto& outputs = x->job->result().outputs;
              for (size_t i = 0; i < x->streams.size() && i < outputs.size(); ++i) {
                PrefixStream& s = x->streams[i];
                s.advance(outputs[i], /*final=*/true);
                choices.push_back({s.text(), s.stopped() ? "stop" : "length", s.tokens()});
              }
              out = dump(
                  full_response(x->meta, choices, static_cast<int64_t>(x->request.prompt.size()), stats()));
            }
            finish_metrics(x->job->error() ? 500 : 200);
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
    return;
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, x, finish_metrics](size_t, httplib::DataSink& sink) {
        auto put = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
        auto fail = [&] {
          x->job->cancel();
          return false;
        };
        const int n = static_cast<int>(x->streams.size());
        std::vector<uint8_t> closed(n, 0);
        if (x->meta.endpoint == Endpoint::kChat)
          for (int i = 0; i < n; ++i)
            if (!put(sse(text_chunk(x->meta, i, "", "", /*role_only=*/true)))) return fail();
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
              if (!put(sse(diffusion_chunk(x->meta, codec_, u, x->request.mask_placeholder, ms,
                                           x->request.params.mask_id))))
                return fail();
            }
            for (int i = 0; i < n && i < static_cast<int>(u.canvas.size()); ++i) {
              if (closed[i]) continue;
              // Only the final prefix: LLaDA2.1 may still edit the tokens of its current block.
              const int64_t final_prefix = i < static_cast<int>(u.final_prefix.size()) ? u.final_prefix[i] : -1;
              const std::string delta = x->streams[i].advance(u.canvas[i], false, final_prefix);
              if (!delta.empty() && !put(sse(text_chunk(x->meta, i, delta, "")))) return fail();
              if (x->streams[i].done() && !close_row(i)) return fail();
            }
          }
          // Every choice has its text (an end token or stop string reached): the rest of the canvas is unused
          // (a diffusing client watches the canvas to its end).
          if (!news.ended && !x->request.diffusing &&
              std::all_of(closed.begin(), closed.end(), [](uint8_t c) { return c != 0; }))
            x->job->cancel();
          if (!news.ended) continue;
          if (x->job->error()) {
            ApiError e{500, *x->job->error(), "", "server_error", ""};
            ++metrics_.failed;
            finish_metrics(500);
            put(sse(error_body(e)));
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
          if (x->request.include_usage &&
              !put(sse(usage_chunk(x->meta, static_cast<int64_t>(x->request.prompt.size()), completion))))
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

}  // namespace

int serve(std::shared_ptr<Model> model, const std::string& model_dir, const ServeOptions& options) {
  std::unique_ptr<App> app;
  try {
    const std::string tok_dir = options.tokenizer_dir.empty() ? model_dir : options.tokenizer_dir;
    // The codec's mask / EOS ids: the model's with --mask-id / --eos-id put in (a model whose files name no
    // mask id, as the tiny LLaDA2 one, is served with --mask-id; without one, requests must give mask_id).
    ModelInfo info = model->info();
    try {
      info = with_token_overrides(info, options.policy.defaults);
    } catch (const Error&) {
      if (options.policy.defaults.mask_id >= 0 || options.policy.defaults.eos_id >= 0) throw;
    }
    TextCodec codec = options.tokenizer_dir.empty() ? TextCodec::load_if_present(tok_dir, info)
                                                    : TextCodec::load(tok_dir, info);
    if (!codec.tokenizer_error().empty())
      std::fprintf(stderr, "dllm serve: warning: %s; only token-id prompts can be served\n",
                   codec.tokenizer_error().c_str());
    if (!options.quiet)
      std::fprintf(stderr, "dllm serve: text codec: %s%s\n", codec.kind().c_str(),
                   codec.chat_template() ? " + chat template" : "");
    app = std::make_unique<App>(model, std::move(codec), options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dllm serve: %s\n", e.what());
    return 1;
  }
  httplib::Server server;
  const size_t threads = static_cast<size_t>(options.limits.max_queue + options.limits.max_batch_rows + 16);
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
  g_server = &server;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::fprintf(stderr, "dllm serve: listening on http://%s:%d (model '%s')\n", options.host.c_str(), port,
               options.policy.model_id.c_str());
  std::fflush(stderr);
  server.listen_after_bind();
  g_server = nullptr;
  if (!options.quiet) std::fprintf(stderr, "dllm serve: stopped\n");
  return 0;
}

}  // namespace dllm::server
