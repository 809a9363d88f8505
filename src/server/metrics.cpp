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

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

std::string Metrics::render() const {
  std::string out;
  head(out, "dllm_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, n] : requests_)
      line(out, "dllm_requests_total",
           "endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"",
           static_cast<double>(n));
  }
  auto counter = [&](const char* name, const char* help, double v) {
    head(out, name, "counter", help);
    line(out, name, "", v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    head(out, name, "gauge", help);
    line(out, name, "", v);
  };
  counter("dllm_prompt_tokens_total", "Prompt tokens of admitted generations.", prompt_tokens.load());
  counter("dllm_completion_tokens_total", "Generated tokens returned as text.", completion_tokens.load());
  counter("dllm_forwards_total", "Model forward passes (one batched forward counts once).", forwards.load());
  counter("dllm_forward_rows_total", "Canvas rows run through the model, over all forwards.",
          forward_rows.load());
  counter("dllm_forward_tokens_total", "Token positions run through the model, padding included.",
          forward_tokens.load());
  counter("dllm_denoising_steps_total", "Denoising steps taken, summed over requests.", steps.load());
  counter("dllm_cancelled_total", "Generations cancelled (client gone).", cancelled.load());
  counter("dllm_failed_total", "Generations that failed inside the engine.", failed.load());
  gauge("dllm_queue_depth", "Requests waiting for a slot in the batch.",
        static_cast<double>(queue_depth.load()));
  gauge("dllm_active_requests", "Requests being denoised.", static_cast<double>(active_requests.load()));
  gauge("dllm_active_rows", "Canvas rows being denoised.", static_cast<double>(active_rows.load()));
  head(out, "dllm_request_seconds", "histogram", "Generation requests, arrival to complete answer.");
  request_seconds.write(out, "dllm_request_seconds", "");
  head(out, "dllm_queue_seconds", "histogram", "Time a request waited in the queue.");
  queue_seconds.write(out, "dllm_queue_seconds", "");
  head(out, "dllm_first_step_seconds", "histogram",
       "Arrival to the first denoised canvas (time to first draft).");
  first_step_seconds.write(out, "dllm_first_step_seconds", "");
  head(out, "dllm_forward_seconds", "histogram", "Duration of one (batched) model forward.");
  forward_seconds.write(out, "dllm_forward_seconds", "");
  head(out, "dllm_batch_rows", "histogram", "Canvas rows per model forward.");
  batch_rows.write(out, "dllm_batch_rows", "");
  return out;
}

}  // namespace dllm::server
