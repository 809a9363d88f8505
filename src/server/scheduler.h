// The request queue and the batching scheduler. One thread owns the model: each iteration it admits queued
// jobs while the batch has room, drops cancelled ones, runs one forward for all active uncached canvases
// together (rows right-padded to the longest, padding masked out by the validity flags) plus one forward per
// cached or block-causal canvas, and steps every job's DenoiseLoop (denoise/denoise_loop.h: a Denoiser, or
// the block-diffusion loops, one BlockDenoiser per choice in turn). Jobs join and leave between any two
// steps. Each job gets its canvas after every step through its own mailbox; nothing the scheduler does ever
// blocks on a client.
//
// Models that dllm::generate runs whole have their own runner, GenerateScheduler: one job at a time, in
// arrival order: autoregressive models (ModelInfo::autoregressive) token by token, uniform-state canvas
// models (DiffusionGemma: Model::canvas_decoder()) denoising step by denoising step. Several served models
// each have their runner; a ForwardGate the runners share lets one model forward run at a time in the whole
// server (a CPU forward uses every core), in the order they asked for it.
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

#include "denoise/denoise_loop.h"
#include "dllm/dllm.h"
#include "server/metrics.h"

namespace dllm::server {

using Clock = std::chrono::steady_clock;

// The canvas after one step of a job (every choice: a block loop's event has the running choice only, the
// others keep their last canvas; a choice not started yet is empty).
struct StepUpdate {
  int64_t step = 0, block = 0, forwards = 0;
  std::vector<std::vector<int32_t>> canvas;     // generated region per row, masks included
  std::vector<std::vector<int64_t>> committed;  // positions set in this step, per row
  std::vector<std::vector<int64_t>> edited;     // positions whose decoded token an edit replaced (LLaDA2.1)
  std::vector<int64_t> final_prefix;            // per row: positions [0, this) will not change any more
};

// Which canvases a job's mailbox keeps: none (only the end matters), the latest, or every step's.
enum class Updates { kNone, kLatest, kAll };

// The part of each row's canvas a job answers with: positions [offset, offset + length) (infill: the masks
// between prompt and suffix); length < 0: the whole canvas.
struct Window {
  int64_t offset = 0, length = -1;
};

// One model forward at a time, across every runner that shares the gate, granted first come, first served (a
// ticket lock: a runner that releases and asks again queues behind those already waiting).
class ForwardGate {
 public:
  void lock();
  void unlock();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ = 0, serving_ = 0;
};

// How dllm::generate runs a GenerateScheduler job's prompts: one after another (autoregressive decoding: an
// event carries one row) or as one batch (a uniform-state canvas model: an event carries every row).
enum class PromptRows { kInTurn, kBatched };

class Job {
 public:
  // A denoising job (Scheduler).
  Job(std::unique_ptr<DenoiseLoop> denoiser, Updates updates, Window window = {});
  // A job dllm::generate runs (GenerateScheduler): the prompts, one after another or as one batch.
  Job(std::vector<std::vector<int32_t>> prompts, GenerateParams params, Updates updates,
      PromptRows prompt_rows = PromptRows::kInTurn, Window window = {});

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
  // The server ends the job (its deadline passed, a drain ran out of time): it stops as cancel() does, and
  // its answer is `message` as an error with this HTTP status and code.
  void cancel_with_error(std::string message, int status, std::string code);

  // After ended: the outcome. error_status / error_code: 500 "server_error" unless cancel_with_error said.
  const std::optional<std::string>& error() const { return error_; }
  int error_status() const { return error_status_; }
  const std::string& error_code() const { return error_code_; }
  const GenerateResult& result() const { return result_; }

  Clock::time_point arrived = Clock::now(), started, first_step;
  Clock::time_point deadline{};  // the server ends the job after it (--request-timeout); {} = none
  bool ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }
  int64_t rows = 1;

 private:
  friend class Scheduler;
  friend class GenerateScheduler;
  void publish(StepUpdate u);
  void finish(GenerateResult r, std::optional<std::string> error);

  // The event of the last step merged into the rows' canvases (scheduler thread only), cut to the window.
  StepUpdate merge(const StepEvent& ev);

  std::unique_ptr<DenoiseLoop> denoiser_;
  std::vector<std::vector<int32_t>> prompts_;  // GenerateScheduler jobs
  GenerateParams params_;
  // An event carries one row (StepEvent::row): block loops, autoregressive decoding.
  bool row_events_ = false;
  Window window_;
  Updates mode_;
  std::vector<std::vector<int32_t>> canvas_;
  std::vector<int64_t> final_prefix_;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StepUpdate> updates_;
  bool ended_ = false;
  GenerateResult result_;
  std::optional<std::string> error_;
  std::optional<std::string> server_error_;  // cancel_with_error's message (under mu_)
  int error_status_ = 500;
  std::string error_code_ = "server_error";
  int64_t steps_ = 0;
};

struct SchedulerLimits {
  int64_t max_queue = 64;      // queued jobs beyond the batch: more answers 429
  int64_t max_batch_rows = 8;  // canvas rows denoised together
};

// What the server hands jobs to: a Scheduler (masked diffusion models) or a GenerateScheduler.
class Runner {
 public:
  virtual ~Runner() = default;
  // Queues the job; false when the queue is full.
  virtual bool submit(const std::shared_ptr<Job>& job) = 0;
  virtual void shutdown() = 0;
};

class Scheduler final : public Runner {
 public:
  // `gate`: shared with the other models' runners (nullptr: this model alone).
  Scheduler(Model& model, Metrics& metrics, SchedulerLimits limits, ForwardGate* gate = nullptr);
  ~Scheduler() override;
  bool submit(const std::shared_ptr<Job>& job) override;
  void shutdown() override;

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
  ForwardGate* gate_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// The runner of a model that dllm::generate runs whole (an autoregressive or a uniform-state canvas model):
// one thread runs the queued jobs one at a time, in arrival order (an autoregressive job's n choices one
// after another, a canvas job's as one batch), holding the gate from one step event to the next only (a
// token, a denoising step), so that other models' forwards interleave with its steps. A cancelled job stops
// at its next step.
class GenerateScheduler final : public Runner {
 public:
  // `drafter` (optional, autoregressive models): every job decodes speculatively with it (greedy output
  // unchanged).
  GenerateScheduler(Model& model, Metrics& metrics, SchedulerLimits limits, ForwardGate* gate = nullptr,
                    Model* drafter = nullptr, DraftParams draft = {});
  ~GenerateScheduler() override;
  bool submit(const std::shared_ptr<Job>& job) override;
  void shutdown() override;

 private:
  void loop();
  void run(Job& job);

  Model& model_;
  Metrics& metrics_;
  SchedulerLimits limits_;
  ForwardGate* gate_;
  Model* drafter_;  // speculative decoding with this diffusion model (nullptr: none)
  DraftParams draft_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dllm::server
