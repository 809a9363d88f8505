#include "server/scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "denoise/batch_forward.h"

namespace dllm::server {

void ForwardGate::lock() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = next_++;
  cv_.wait(lock, [&] { return serving_ == ticket; });
}

void ForwardGate::unlock() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++serving_;
  }
  cv_.notify_all();
}

namespace {

// Holds the gate (when there is one) for its lifetime; yield() lets the runners waiting go first.
class GateHold {
 public:
  explicit GateHold(ForwardGate* gate) : gate_(gate) {
    if (gate_) gate_->lock();
  }
  ~GateHold() { release(); }
  GateHold(const GateHold&) = delete;
  GateHold& operator=(const GateHold&) = delete;
  void release() {
    if (gate_ && held_) gate_->unlock();
    held_ = false;
  }
  void yield() {
    if (!gate_) return;
    release();
    gate_->lock();
    held_ = true;
  }

 private:
  ForwardGate* gate_;
  bool held_ = true;
};

}  // namespace

Job::Job(std::unique_ptr<DenoiseLoop> denoiser, Updates updates, Window window)
    : rows(denoiser->batch_rows()),
      denoiser_(std::move(denoiser)),
      row_events_(denoiser_->block_loop()),
      window_(window),
      mode_(updates),
      canvas_(denoiser_->rows()),
      final_prefix_(denoiser_->rows(), 0) {}

Job::Job(std::vector<std::vector<int32_t>> prompts, GenerateParams params, Updates updates,
         PromptRows prompt_rows, Window window)
    : rows(prompt_rows == PromptRows::kBatched ? static_cast<int64_t>(prompts.size()) : 1),
      prompts_(std::move(prompts)),
      params_(std::move(params)),
      row_events_(prompt_rows == PromptRows::kInTurn),
      window_(window),
      mode_(updates),
      canvas_(prompts_.size()),
      final_prefix_(prompts_.size(), 0) {}

StepUpdate Job::merge(const StepEvent& ev) {
  const int64_t n = static_cast<int64_t>(canvas_.size());
  StepUpdate u;
  u.step = steps_;
  u.block = ev.block;
  u.forwards = ev.forwards;
  u.committed.resize(n);
  u.edited.resize(n);
  // A block loop's or an autoregressive event carries one row (ev.row); a Denoiser's carries all of them.
  const int64_t first = row_events_ ? ev.row : 0;
  if (ev.canvas)
    for (size_t k = 0; k < ev.canvas->size() && first + static_cast<int64_t>(k) < n; ++k) {
      const size_t r = first + k;
      canvas_[r] = (*ev.canvas)[k];
      if (ev.committed && k < ev.committed->size()) u.committed[r] = (*ev.committed)[k];
      if (ev.edited && k < ev.edited->size()) u.edited[r] = (*ev.edited)[k];
      final_prefix_[r] = ev.final_prefix && k < ev.final_prefix->size()
                             ? (*ev.final_prefix)[k]
                             : static_cast<int64_t>(canvas_[r].size());
    }
  if (window_.length < 0) {
    u.canvas = canvas_;
    u.final_prefix = final_prefix_;
    return u;
  }
  // Positions relative to the window; those outside it dropped.
  const int64_t lo = window_.offset, hi = window_.offset + window_.length;
  u.canvas.resize(n);
  u.final_prefix.resize(n);
  auto shift = [&](std::vector<int64_t>& positions) {
    std::vector<int64_t> kept;
    for (int64_t p : positions)
      if (p >= lo && p < hi) kept.push_back(p - lo);
    positions = std::move(kept);
  };
  for (int64_t r = 0; r < n; ++r) {
    const auto& row = canvas_[r];
    const int64_t size = static_cast<int64_t>(row.size());
    if (size > lo) u.canvas[r].assign(row.begin() + lo, row.begin() + std::min(hi, size));
    u.final_prefix[r] = std::clamp<int64_t>(final_prefix_[r] - lo, 0, window_.length);
    shift(u.committed[r]);
    shift(u.edited[r]);
  }
  return u;
}

Job::News Job::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return ended_ || !updates_.empty(); });
  News n;
  n.updates.assign(std::make_move_iterator(updates_.begin()), std::make_move_iterator(updates_.end()));
  updates_.clear();
  n.ended = ended_;
  return n;
}

void Job::publish(StepUpdate u) {
  if (mode_ == Updates::kNone) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (mode_ == Updates::kLatest) updates_.clear();
  updates_.push_back(std::move(u));
  cv_.notify_all();
}

void Job::finish(GenerateResult r, std::optional<std::string> error) {
  if (window_.length >= 0)
    for (auto& row : r.outputs) {
      const int64_t size = static_cast<int64_t>(row.size());
      const int64_t lo = std::min(window_.offset, size), hi = std::min(window_.offset + window_.length, size);
      row = std::vector<int32_t>(row.begin() + lo, row.begin() + hi);
    }
  std::lock_guard<std::mutex> lock(mu_);
  if (ended_) return;
  result_ = std::move(r);
  error_ = error ? std::move(error) : server_error_;
  ended_ = true;
  cv_.notify_all();
}

void Job::cancel_with_error(std::string message, int status, std::string code) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    server_error_ = std::move(message);
    error_status_ = status;
    error_code_ = std::move(code);
  }
  cancelled_ = true;
}

Scheduler::Scheduler(Model& model, Metrics& metrics, SchedulerLimits limits, ForwardGate* gate)
    : model_(model), metrics_(metrics), limits_(limits), gate_(gate), thread_([this] { loop(); }) {}

Scheduler::~Scheduler() {
  shutdown();
}

bool Scheduler::submit(const std::shared_ptr<Job>& job) {
  if (!job->denoiser_) return false;  // not a denoising job
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || static_cast<int64_t>(queue_.size()) >= limits_.max_queue) return false;
    queue_.push_back(job);
    metrics_.queue_depth = static_cast<int64_t>(queue_.size());
  }
  cv_.notify_all();
  return true;
}

void Scheduler::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::loop() {
  std::vector<std::shared_ptr<Job>> active;
  int64_t active_rows = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || !active.empty(); });
      if (stop_) {
        for (auto& j : queue_) j->finish({}, "the server is shutting down");
        queue_.clear();
        break;
      }
      // Queued jobs whose client left go at once, wherever they are in the queue.
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (!(*it)->cancelled()) {
          ++it;
          continue;
        }
        GenerateResult r;
        r.cancelled = true;
        (*it)->finish(std::move(r), std::nullopt);
        ++metrics_.cancelled;
        it = queue_.erase(it);
      }
      // Admit in arrival order while the batch has room (a job bigger than the batch runs alone).
      while (!queue_.empty()) {
        std::shared_ptr<Job> j = queue_.front();
        if (!active.empty() && active_rows + j->rows > limits_.max_batch_rows) break;
        queue_.pop_front();
        j->started = Clock::now();
        metrics_.queue_seconds.observe(std::chrono::duration<double>(j->started - j->arrived).count());
        active_rows += j->rows;
        active.push_back(std::move(j));
      }
      metrics_.queue_depth = static_cast<int64_t>(queue_.size());
    }
    metrics_.active_requests = static_cast<int64_t>(active.size());
    metrics_.active_rows = active_rows;
    try {
      step_all(active);
    } catch (
        const std::exception& e) {  // not expected (run_step catches what the engine throws): fail the batch
      for (auto& j : active) j->finish({}, std::string("scheduler: ") + e.what());
      metrics_.failed += active.size();
    }
    retire(active);
    active_rows = 0;
    for (auto& j : active) active_rows += j->rows;
    metrics_.active_requests = static_cast<int64_t>(active.size());
    metrics_.active_rows = active_rows;
  }
  for (auto& j : active) j->finish({}, "the server is shutting down");
}

void Scheduler::step_all(std::vector<std::shared_ptr<Job>>& active) {
  // Cancelled jobs leave before the forward.
  for (auto& j : active)
    if (j->cancelled()) {
      j->denoiser_->cancel();
      GenerateResult r = j->denoiser_->result();
      r.cancelled = true;
      j->finish(std::move(r), std::nullopt);
      ++metrics_.cancelled;
    }
  retire(active);

  // Plans: each job's next forward, built once per step (a cached plan runs alone: its cache is its own; so
  // does a block-causal one).
  std::vector<Pending> uncached, cached;
  for (auto& j : active) {
    try {
      const ForwardPlan& p = j->denoiser_->plan();
      const bool alone = p.cache_op != CacheOp::kNone || p.attention_block > 0;  // see forward_plans
      (alone ? cached : uncached).push_back({j, &p});
    } catch (const std::exception& e) {
      j->finish({}, e.what());
      ++metrics_.failed;
    }
  }
  // Batch canvases of similar length: padding a short canvas to a long one costs more than the batch saves,
  // so a group grows (shortest first) only while its padded positions stay within 25% of its real ones.
  std::sort(uncached.begin(), uncached.end(),
            [](const Pending& a, const Pending& b) { return a.plan->len < b.plan->len; });
  std::vector<Pending> group;
  int64_t rows = 0, real = 0;
  for (const Pending& p : uncached) {
    const int64_t len = p.plan->len;
    if (!group.empty() && (rows + p.plan->rows) * len * 4 > (real + p.plan->rows * len) * 5) {
      run_step(group);
      group.clear();
      rows = real = 0;
    }
    group.push_back(p);
    rows += p.plan->rows;
    real += p.plan->rows * len;
  }
  if (!group.empty()) run_step(group);
  for (const Pending& p : cached) run_step({p});
}

void Scheduler::retire(std::vector<std::shared_ptr<Job>>& active) {
  active.erase(std::remove_if(active.begin(), active.end(),
                              [](const std::shared_ptr<Job>& j) {
                                std::lock_guard<std::mutex> lock(j->mu_);
                                return j->ended_;
                              }),
               active.end());
}

void Scheduler::run_step(const std::vector<Pending>& group) {
  std::vector<const ForwardPlan*> plans;
  for (const Pending& p : group) plans.push_back(p.plan);
  GateHold hold(gate_);
  const auto t0 = Clock::now();
  try {
    // One forward for every canvas of the group (denoise/batch_forward.h): rows right-padded to the longest.
    // On a device, the logits stay there when every job's step needs only their per-row stats.
    bool stats = model_.reduces_on_device();
    for (const Pending& p : group) stats = stats && p.job->denoiser_->takes_stats();
    BatchedLogits out;
    BatchedStats out_stats;
    if (stats)
      out_stats = forward_plans_stats(model_, plans);
    else
      out = forward_plans(model_, plans);
    const int64_t rows = stats ? out_stats.rows : out.rows, len = stats ? out_stats.len : out.len;
    metrics_.forward_seconds.observe(std::chrono::duration<double>(Clock::now() - t0).count());
    ++metrics_.forwards;
    metrics_.forward_rows += rows;
    metrics_.forward_tokens += rows * len;
    metrics_.batch_rows.observe(static_cast<double>(rows));

    for (size_t k = 0; k < group.size(); ++k) {
      Job& j = *group[k].job;
      try {
        if (stats)
          j.denoiser_->step(std::span<const LogitStats>(out_stats.stats[k]));
        else
          j.denoiser_->step(std::span<const float>(out.logits[k]));
        ++metrics_.steps;
        const StepEvent& ev = j.denoiser_->event();
        if (j.steps_++ == 0) {
          j.first_step = Clock::now();
          metrics_.observe_first_step(std::chrono::duration<double>(j.first_step - j.arrived).count());
        }
        if (j.mode_ != Updates::kNone) j.publish(j.merge(ev));
        if (j.denoiser_->done()) {
          GenerateResult r = j.denoiser_->result();
          r.seconds = std::chrono::duration<double>(Clock::now() - j.started).count();
          j.finish(std::move(r), std::nullopt);
        }
      } catch (const std::exception& e) {
        j.finish({}, e.what());
        ++metrics_.failed;
      }
    }
  } catch (const std::exception& e) {
    for (const Pending& p : group) p.job->finish({}, std::string("model forward failed: ") + e.what());
    metrics_.failed += group.size();
  }
}

}  // namespace dllm::server

namespace dllm::server {

GenerateScheduler::GenerateScheduler(Model& model, Metrics& metrics, SchedulerLimits limits,
                                     ForwardGate* gate, Model* drafter, DraftParams draft)
    : model_(model),
      metrics_(metrics),
      limits_(limits),
      gate_(gate),
      drafter_(drafter),
      draft_(draft),
      thread_([this] { loop(); }) {}

GenerateScheduler::~GenerateScheduler() {
  shutdown();
}

bool GenerateScheduler::submit(const std::shared_ptr<Job>& job) {
  if (job->denoiser_) return false;  // a denoising job (Scheduler)
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || static_cast<int64_t>(queue_.size()) >= limits_.max_queue) return false;
    queue_.push_back(job);
    metrics_.queue_depth = static_cast<int64_t>(queue_.size());
  }
  cv_.notify_all();
  return true;
}

void GenerateScheduler::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GenerateScheduler::loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) {
        for (auto& j : queue_) j->finish({}, "the server is shutting down");
        queue_.clear();
        metrics_.queue_depth = 0;
        return;
      }
      job = queue_.front();
      queue_.pop_front();
      metrics_.queue_depth = static_cast<int64_t>(queue_.size());
    }
    if (job->cancelled()) {
      GenerateResult r;
      r.cancelled = true;
      job->finish(std::move(r), std::nullopt);
      ++metrics_.cancelled;
      continue;
    }
    metrics_.active_requests = 1;
    metrics_.active_rows = job->rows;
    run(*job);
    metrics_.active_requests = 0;
    metrics_.active_rows = 0;
  }
}

void GenerateScheduler::run(Job& j) {
  j.started = Clock::now();
  metrics_.queue_seconds.observe(std::chrono::duration<double>(j.started - j.arrived).count());
  GateHold hold(gate_);
  auto since = Clock::now();  // the gate was granted: the forward(s) behind the next step start
  int64_t counted = 0;        // forwards counted so far (StepEvent::forwards is cumulative)
  // A token (autoregressive) or a denoising step of every row (a canvas model).
  auto on_step = [&](const StepEvent& ev) {
    const auto now = Clock::now();
    const int64_t forwards = ev.forwards - counted;
    counted = ev.forwards;
    metrics_.forwards += forwards;
    metrics_.forward_rows += forwards * j.rows;
    for (int64_t i = 0; i < forwards; ++i) metrics_.batch_rows.observe(static_cast<double>(j.rows));
    metrics_.forward_seconds.observe(std::chrono::duration<double>(now - since).count());
    ++metrics_.steps;
    if (j.steps_++ == 0) {
      j.first_step = now;
      metrics_.observe_first_step(std::chrono::duration<double>(j.first_step - j.arrived).count());
    }
    if (j.mode_ != Updates::kNone) j.publish(j.merge(ev));
    hold.yield();  // another model's forward may go before this one's next step
    since = Clock::now();
    return !j.cancelled() && !stop_;
  };
  SpeculativeStats spec;
  Expected<GenerateResult> r =
      drafter_ ? generate_speculative(model_, *drafter_, j.prompts_, j.params_, draft_, on_step, &spec)
               : generate(model_, j.prompts_, j.params_, on_step);
  hold.release();
  metrics_.draft_drafted += static_cast<uint64_t>(spec.drafted);
  metrics_.draft_accepted += static_cast<uint64_t>(spec.accepted);
  if (!r) {
    j.finish({}, r.error());
    ++metrics_.failed;
    return;
  }
  metrics_.forwards += r->forwards - counted;
  metrics_.forward_tokens += r->forward_tokens;
  if (r->cancelled) {
    if (stop_) {
      j.finish({}, "the server is shutting down");
      return;
    }
    ++metrics_.cancelled;
  }
  r->seconds = std::chrono::duration<double>(Clock::now() - j.started).count();
  j.finish(std::move(*r), std::nullopt);
}

}  // namespace dllm::server
