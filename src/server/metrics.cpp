#include "server/metrics.h"

#include <cstdio>

namespace dllm::server {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void line(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += ' ';
  out += num(v);
  out += '\n';
}

void head(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::vector<double> latency_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

double Histogram::mean() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_ ? sum_ / static_cast<double>(count_) : 0.0;
}

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string sep = labels.empty() ? "" : labels + ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    line(out, name + "_bucket", sep + "le=\"" + num(bounds_[i]) + "\"", static_cast<double>(cumulative));
  }
  line(out, name + "_bucket", sep + "le=\"+Inf\"", static_cast<double>(count_));
  line(out, name + "_sum", labels, sum_);
  line(out, name + "_count", labels, static_cast<double>(count_));
}

Metrics::Metrics()
    : request_seconds(latency_buckets()),
      queue_seconds(latency_buckets()),
      first_step_seconds(latency_buckets()),
      forward_seconds({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}),
      batch_rows({1, 2, 4, 8, 16, 32, 64}) {}

std::string label_value(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void ServerMetrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

void ServerMetrics::count_route(const std::string& model, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++routes_[{model, reason}];
}

std::string ServerMetrics::render(const std::vector<ModelMetricsView>& models) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    head(out, "dllm_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
    for (const auto& [key, n] : requests_)
      line(out, "dllm_requests_total",
           "endpoint=\"" + label_value(key.first) + "\",status=\"" + std::to_string(key.second) + "\"",
           static_cast<double>(n));
    head(out, "dllm_draining", "gauge", "1 while the server drains after SIGTERM (new requests answer 503).");
    line(out, "dllm_draining", "", draining.load() ? 1.0 : 0.0);
    head(out, "dllm_requests_timed_out_total", "counter",
         "Requests the server ended at their --request-timeout deadline (answered 504).");
    line(out, "dllm_requests_timed_out_total", "", static_cast<double>(timed_out.load()));
    head(
        out, "dllm_route_total", "counter",
        "Generation requests accepted, by the model that took them and why (requested: named in the request; "
        "default: no model named; the router's reasons for model \"auto\": docs/hybrid.md).");
    for (const auto& [key, n] : routes_)
      line(out, "dllm_route_total",
           "model=\"" + label_value(key.first) + "\",reason=\"" + label_value(key.second) + "\"",
           static_cast<double>(n));
  }
  auto label = [](const ModelMetricsView& m) { return "model=\"" + label_value(m.name) + "\""; };
  head(out, "dllm_model_info", "gauge", "The served models (1 each): kind diffusion or autoregressive.");
  for (const auto& m : models)
    line(out, "dllm_model_info",
         label(m) + ",kind=\"" + label_value(m.kind) + "\",architecture=\"" + label_value(m.architecture) +
             "\"",
         1);
  auto series = [&](const char* name, const char* type, const char* help, auto&& value) {
    head(out, name, type, help);
    for (const auto& m : models) line(out, name, label(m), static_cast<double>(value(*m.metrics)));
  };
  auto counter = [&](const char* name, const char* help, auto&& value) {
    series(name, "counter", help, value);
  };
  auto gauge = [&](const char* name, const char* help, auto&& value) { series(name, "gauge", help, value); };
  counter("dllm_prompt_tokens_total", "Prompt tokens of admitted generations.",
          [](const Metrics& m) { return m.prompt_tokens.load(); });
  counter("dllm_completion_tokens_total", "Generated tokens returned as text.",
          [](const Metrics& m) { return m.completion_tokens.load(); });
  counter("dllm_forwards_total", "Model forward passes (one batched forward counts once).",
          [](const Metrics& m) { return m.forwards.load(); });
  counter("dllm_forward_rows_total", "Canvas rows run through the model, over all forwards.",
          [](const Metrics& m) { return m.forward_rows.load(); });
  counter("dllm_forward_tokens_total", "Token positions run through the model, padding included.",
          [](const Metrics& m) { return m.forward_tokens.load(); });
  counter("dllm_denoising_steps_total",
          "Denoising steps taken, summed over requests (autoregressive models: tokens decoded).",
          [](const Metrics& m) { return m.steps.load(); });
  counter("dllm_cancelled_total", "Generations cancelled (client gone).",
          [](const Metrics& m) { return m.cancelled.load(); });
  counter("dllm_failed_total", "Generations that failed inside the engine.",
          [](const Metrics& m) { return m.failed.load(); });
  counter("dllm_draft_tokens_total", "Speculative decoding: tokens the diffusion drafter proposed.",
          [](const Metrics& m) { return m.draft_drafted.load(); });
  counter("dllm_draft_accepted_tokens_total",
          "Speculative decoding: drafted tokens the autoregressive model kept.",
          [](const Metrics& m) { return m.draft_accepted.load(); });
  gauge("dllm_queue_depth", "Requests waiting for a slot in the batch.",
        [](const Metrics& m) { return m.queue_depth.load(); });
  gauge("dllm_active_requests", "Requests being generated.",
        [](const Metrics& m) { return m.active_requests.load(); });
  gauge("dllm_active_rows", "Canvas rows being generated.",
        [](const Metrics& m) { return m.active_rows.load(); });
  auto histogram = [&](const char* name, const char* help, const Histogram Metrics::*h) {
    head(out, name, "histogram", help);
    for (const auto& m : models) (m.metrics->*h).write(out, name, label(m));
  };
  histogram("dllm_request_seconds", "Generation requests, arrival to complete answer.",
            &Metrics::request_seconds);
  histogram("dllm_queue_seconds", "Time a request waited in the queue.", &Metrics::queue_seconds);
  histogram("dllm_first_step_seconds",
            "Arrival to the first denoised canvas (time to first draft; autoregressive: first token).",
            &Metrics::first_step_seconds);
  histogram("dllm_forward_seconds", "Duration of one (batched) model forward.", &Metrics::forward_seconds);
  histogram("dllm_batch_rows", "Canvas rows per model forward.", &Metrics::batch_rows);
  return out;
}

}  // namespace dllm::server
