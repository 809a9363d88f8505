// Server metrics in the Prometheus text exposition format (GET /metrics): counters, gauges and histograms
// with fixed buckets. Each served model has its own engine metrics (Metrics, labelled model="NAME" on the
// page); the HTTP requests and the router's decisions are counted server-wide (ServerMetrics). Thread-safe;
// cheap enough to update on every step.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace dllm::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  double mean() const;  // 0 before the first observation
  // Appends the _bucket/_sum/_count lines of `name` (with `labels`, e.g. `endpoint="chat"`, or "").
  void write(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// One served model's engine: its queue, forwards and steps (autoregressive models: one step per token).
struct Metrics {
  Metrics();

  std::atomic<uint64_t> prompt_tokens{0}, completion_tokens{0};
  std::atomic<uint64_t> forwards{0}, forward_rows{0}, forward_tokens{0}, steps{0};
  std::atomic<uint64_t> cancelled{0}, failed{0};
  std::atomic<uint64_t> draft_drafted{0}, draft_accepted{0};  // speculative decoding (--draft)
  std::atomic<int64_t> queue_depth{0}, active_requests{0}, active_rows{0};

  Histogram request_seconds;     // from arrival to the last byte of the answer's text
  Histogram queue_seconds;       // waiting for a slot in the batch
  Histogram first_step_seconds;  // arrival to the first canvas (time to first draft / first token)
  std::atomic<double> first_request_first_step_seconds{-1};  // the first request's (cold start); -1: none yet
  void observe_first_step(double seconds) {
    first_step_seconds.observe(seconds);
    double none = -1;
    first_request_first_step_seconds.compare_exchange_strong(none, seconds);
  }
  Histogram forward_seconds;     // one (batched) model forward
  Histogram batch_rows;          // rows per forward
};

// A served model as /metrics shows it.
struct ModelMetricsView {
  std::string name, kind, architecture;
  const Metrics* metrics = nullptr;
};

class ServerMetrics {
 public:
  // dllm_requests_total{endpoint, status}
  void count_request(const std::string& endpoint, int status);
  // dllm_route_total{model, reason}
  void count_route(const std::string& model, const std::string& reason);
  // dllm_draining (1 while a SIGTERM drain runs), dllm_requests_timed_out_total (--request-timeout).
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> timed_out{0};
  // The whole /metrics page: requests and routes, then every model's series labelled model="NAME".
  std::string render(const std::vector<ModelMetricsView>& models) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::pair<std::string, std::string>, uint64_t> routes_;
};

// A Prometheus label value: backslash, double quote and newline escaped.
std::string label_value(const std::string& s);

}  // namespace dllm::server
