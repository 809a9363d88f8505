// The request queue and the batching scheduler. One thread owns the model: each iteration it admits queued
// jobs while the batch has room, drops cancelled ones, runs one forward for all active uncached canvases
// together (rows right-padded to the longest, padding masked out by the validity flags) plus one forward per
// cached canvas, and steps every job's Denoiser. Jobs join and leave between any two steps. Each job gets its
// canvas after every step through its own mailbox; nothing the scheduler does ever blocks on a client.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "denoise/denoiser.h"
#include "dllm/dllm.h"
#include "server/metrics.h"

namespace dllm::server {

using Clock = std::chrono::steady_clock;

// The canvas after one step of a job.
struct StepUpdate {
  int64_t step = 0, block = 0, forwards = 0;
  std::vector<std::vector<int32_t>> canvas;     // generated region per row, masks included
  std::vector<std::vector<int64_t>> committed;  // positions set in this step, per row
};

// Which canvases a job's mailbox keeps: none (only the end matters), the latest, or every step's.
enum class Updates { kNone, kLatest, kAll };

class Job {
 public:
  Job(std::unique_ptr<Denoiser> denoiser, Updates updates);

  // Handler side: waits up to `timeout` for news. Returns the updates since the last call (see Updates) and
  // whether the job has ended.
  struct News {
    std::vector<StepUpdate> updates;
    bool ended = false;
  };
  News wait(std::chrono::milliseconds timeout);
  // Asks the scheduler to stop working on this job (the client went away).
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  // After ended: the outcome.
  const std::optional<std::string>& error() const { return error_; }
  const GenerateResult& result() const { return result_; }

  Clock::time_point arrived = Clock::now(), started, first_step;
  int64_t rows = 1;

 private:
  friend class Scheduler;
  void publish(StepUpdate u);
  void finish(GenerateResult r, std::optional<std::string> error);

  std::unique_ptr<Denoiser> denoiser_;
  Updates mode_;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StepUpdate> updates_;
  bool ended_ = false;
  GenerateResult result_;
  std::optional<std::string> error_;
  int64_t steps_ = 0;
};

struct SchedulerLimits {
  int64_t max_queue = 64;      // queued jobs beyond the batch: more answers 429
  int64_t max_batch_rows = 8;  // canvas rows denoised together
};

class Scheduler {
 public:
  Scheduler(Model& model, Metrics& metrics, SchedulerLimits limits);
  ~Scheduler();
  // Queues the job; false when the queue is full.
  bool submit(const std::shared_ptr<Job>& job);
  void shutdown();

 private:
  void loop();
  // A job and the plan of its next step (built once per step by step_all).
  struct Pending {
    std::shared_ptr<Job> job;
    const ForwardPlan* plan;
  };
  void step_all(std::vector<std::shared_ptr<Job>>& active);
  void run_step(const std::vector<Pending>& group);
  void retire(std::vector<std::shared_ptr<Job>>& active);

  Model& model_;
  Metrics& metrics_;
  SchedulerLimits limits_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dllm::server
