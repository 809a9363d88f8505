// The batching scheduler gives every request what dllm::generate gives it alone: canvases of different
// lengths share forwards (right-padded, padding invalid), cached requests run on their own, and a cancelled
// job leaves.
#include "server/scheduler.h"

#include <gtest/gtest.h>

namespace dllm::server {
namespace {

std::shared_ptr<Model> tiny_model(const std::string& name = "llada_tiny_f32") {
  LoadOptions o;
  o.precision = Precision::kF32;
  return Model::load(std::string(DLLM_SOURCE_DIR) + "/tests/data/oracle/models/" + name, o).value();
}

GenerateResult wait_for(Job& job) {
  for (;;) {
    Job::News n = job.wait(std::chrono::milliseconds(1000));
    if (n.ended) break;
  }
  EXPECT_FALSE(job.error()) << *job.error();
  return job.result();
}

TEST(Scheduler, BatchedRequestsMatchGenerateAlone) {
  auto model = tiny_model();
  Metrics metrics;
  Scheduler scheduler(*model, metrics, {16, 8});
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 2, 3, 4, 5}, {9, 8, 7, 6, 5, 4}, {100, 200, 300, 400, 5, 6, 7}};
  std::vector<GenerateParams> params(4);
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].gen_length = 16;
    params[i].block_length = 8;
    params[i].steps = 16;
    params[i].seed = i;
    params[i].temperature = i % 2 ? 0.8 : 0.0;
  }
  params[3].cache = CacheMode::kPrefix;  // runs in its own forward
  std::vector<std::shared_ptr<Job>> jobs;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& prompt = prompts[i % prompts.size()];
    jobs.push_back(std::make_shared<Job>(
        make_denoise_loop(model->info(), std::vector<std::vector<int32_t>>{prompt}, params[i]),
        Updates::kAll));
  }
  for (auto& j : jobs) ASSERT_TRUE(scheduler.submit(j));
  for (size_t i = 0; i < jobs.size(); ++i) {
    GenerateResult got = wait_for(*jobs[i]);
    GenerateResult want = generate(*model, {prompts[i % prompts.size()]}, params[i]).value();
    EXPECT_EQ(got.outputs, want.outputs) << "request " << i;
    EXPECT_EQ(got.forwards, want.forwards);
  }
  EXPECT_LT(metrics.forwards.load(), 4u * 16u) << "the uncached requests shared forwards";
}

TEST(Scheduler, CancelledJobLeavesAndOthersFinish) {
  auto model = tiny_model();
  Metrics metrics;
  Scheduler scheduler(*model, metrics, {16, 8});
  GenerateParams p;
  p.gen_length = 64;
  p.steps = 64;
  auto long_job = std::make_shared<Job>(
      make_denoise_loop(model->info(), std::vector<std::vector<int32_t>>{{1, 2, 3}}, p), Updates::kLatest);
  p.gen_length = 8;
  p.steps = 8;
  auto short_job = std::make_shared<Job>(
      make_denoise_loop(model->info(), std::vector<std::vector<int32_t>>{{1, 2, 3}}, p), Updates::kNone);
  ASSERT_TRUE(scheduler.submit(long_job));
  ASSERT_TRUE(scheduler.submit(short_job));
  long_job->wait(std::chrono::milliseconds(5000));  // its first step
  long_job->cancel();
  GenerateResult r = wait_for(*long_job);
  EXPECT_TRUE(r.cancelled);
  EXPECT_LT(r.forwards, 64);
  EXPECT_EQ(wait_for(*short_job).outputs.size(), 1u);
  EXPECT_EQ(metrics.cancelled.load(), 1u);
}

TEST(Scheduler, FullQueueRefuses) {
  auto model = tiny_model();
  Metrics metrics;
  Scheduler scheduler(*model, metrics, {0, 1});
  GenerateParams p;
  p.gen_length = 8;
  auto job = std::make_shared<Job>(
      make_denoise_loop(model->info(), std::vector<std::vector<int32_t>>{{1, 2}}, p), Updates::kNone);
  EXPECT_FALSE(scheduler.submit(job));
}

// Block-diffusion jobs (SDAR, LLaDA2.1): n choices run one BlockDenoiser each, cached and uncached
// (block-causal) plans run one per forward, and every job gets what dllm::generate gives it alone.
TEST(Scheduler, BlockLoopsMatchGenerateAlone) {
  for (const std::string name : {"sdar_tiny_f32", "llada2_tiny_f32"}) {
    auto model = tiny_model(name);
    Metrics metrics;
    Scheduler scheduler(*model, metrics, {16, 8});
    const std::vector<int32_t> prompt = {281, 160, 15, 381, 272, 28, 154, 314, 409, 147};
    std::vector<GenerateParams> params(3);
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].gen_length = 12;
      params[i].block_length = 4;
      params[i].seed = i;
      params[i].mask_id = name == "llada2_tiny_f32" ? 503 : -1;  // the tiny LLaDA2 config names none
      params[i].eos_id = name == "llada2_tiny_f32" ? 500 : -1;
      params[i].editing_threshold = 0.5;
      params[i].threshold = 0.7;
      params[i].block_threshold = 0.7;
    }
    params[1].cache = CacheMode::kNone;  // block-causal, uncached: still one per forward
    params[2].temperature = 0.7;
    const int n[] = {2, 1, 2};
    std::vector<std::shared_ptr<Job>> jobs;
    for (size_t i = 0; i < params.size(); ++i)
      jobs.push_back(std::make_shared<Job>(
          make_denoise_loop(model->info(), std::vector<std::vector<int32_t>>(n[i], prompt), params[i]),
          Updates::kAll));
    for (auto& j : jobs) ASSERT_TRUE(scheduler.submit(j));
    for (size_t i = 0; i < jobs.size(); ++i) {
      // The updates: every choice's canvas, final prefixes that never shrink while a choice runs.
      std::vector<int64_t> last(n[i], 0);
      int64_t edits = 0;
      for (;;) {
        Job::News news = jobs[i]->wait(std::chrono::milliseconds(1000));
        for (const StepUpdate& u : news.updates) {
          ASSERT_EQ(u.canvas.size(), static_cast<size_t>(n[i]));
          ASSERT_EQ(u.final_prefix.size(), static_cast<size_t>(n[i]));
          for (int r = 0; r < n[i]; ++r) {
            EXPECT_GE(u.final_prefix[r], last[r]) << name << " job " << i;
            last[r] = u.final_prefix[r];
            edits += static_cast<int64_t>(u.edited[r].size());
          }
        }
        if (news.ended) break;
      }
      ASSERT_FALSE(jobs[i]->error()) << *jobs[i]->error();
      const GenerateResult& got = jobs[i]->result();
      GenerateResult want =
          generate(*model, std::vector<std::vector<int32_t>>(n[i], prompt), params[i]).value();
      EXPECT_EQ(got.outputs, want.outputs) << name << " job " << i;
      EXPECT_EQ(got.forwards, want.forwards) << name << " job " << i;
      for (int r = 0; r < n[i]; ++r)
        EXPECT_EQ(last[r], static_cast<int64_t>(want.outputs[r].size())) << "a finished choice is all final";
      if (name == "sdar_tiny_f32") {
        EXPECT_EQ(edits, 0) << "SDAR never edits";
      }
    }
  }
}

std::shared_ptr<Model> tiny_ar_model() {
  LoadOptions o;
  o.precision = Precision::kF32;
  return Model::load(std::string(DLLM_SOURCE_DIR) + "/tests/data/oracle/ar/models/qwen2_tiny", o).value();
}

// Autoregressive jobs beside denoising ones, the two runners sharing one forward gate: every job gets what
// dllm::generate gives it alone, and an AR job's updates grow by one token each.
TEST(GenerateScheduler, MatchesGenerateAloneBesideADiffusionModel) {
  auto ar = tiny_ar_model();
  auto dllm = tiny_model();
  ForwardGate gate;
  Metrics ar_metrics, dllm_metrics;
  GenerateScheduler ar_runner(*ar, ar_metrics, {16, 8}, &gate);
  Scheduler dllm_runner(*dllm, dllm_metrics, {16, 8}, &gate);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  std::vector<GenerateParams> ar_params(3), dllm_params(2);
  for (size_t i = 0; i < ar_params.size(); ++i) {
    ar_params[i].gen_length = 12;
    ar_params[i].seed = i;
    ar_params[i].temperature = i == 0 ? 0.0 : 0.8;
    ar_params[i].top_k = i == 2 ? 20 : 0;
    ar_params[i].stop_ids = std::vector<int32_t>{};  // never stop: every job decodes 12 tokens
  }
  for (size_t i = 0; i < dllm_params.size(); ++i) {
    dllm_params[i].gen_length = 16;
    dllm_params[i].steps = 16;
    dllm_params[i].seed = i;
  }
  const int n[] = {1, 2, 1};
  std::vector<std::shared_ptr<Job>> ar_jobs, dllm_jobs;
  for (size_t i = 0; i < ar_params.size(); ++i)
    ar_jobs.push_back(
        std::make_shared<Job>(std::vector<std::vector<int32_t>>(n[i], prompt), ar_params[i], Updates::kAll));
  for (size_t i = 0; i < dllm_params.size(); ++i)
    dllm_jobs.push_back(std::make_shared<Job>(
        make_denoise_loop(dllm->info(), std::vector<std::vector<int32_t>>{prompt}, dllm_params[i]),
        Updates::kNone));
  for (size_t i = 0; i < ar_jobs.size(); ++i) {
    ASSERT_TRUE(ar_runner.submit(ar_jobs[i]));
    if (i < dllm_jobs.size()) {
      ASSERT_TRUE(dllm_runner.submit(dllm_jobs[i]));
    }
  }
  for (size_t i = 0; i < ar_jobs.size(); ++i) {
    std::vector<size_t> last(n[i], 0);
    int64_t updates = 0;
    for (;;) {
      Job::News news = ar_jobs[i]->wait(std::chrono::milliseconds(1000));
      for (const StepUpdate& u : news.updates) {
        ++updates;
        ASSERT_EQ(u.canvas.size(), static_cast<size_t>(n[i]));
        size_t grown = 0;
        for (int r = 0; r < n[i]; ++r) {
          ASSERT_GE(u.canvas[r].size(), last[r]);
          grown += u.canvas[r].size() - last[r];
          EXPECT_EQ(u.final_prefix[r], static_cast<int64_t>(u.canvas[r].size())) << "every token is final";
          last[r] = u.canvas[r].size();
        }
        EXPECT_EQ(grown, 1u) << "one token per update";
      }
      if (news.ended) break;
    }
    ASSERT_FALSE(ar_jobs[i]->error()) << *ar_jobs[i]->error();
    GenerateResult want =
        generate(*ar, std::vector<std::vector<int32_t>>(n[i], prompt), ar_params[i]).value();
    EXPECT_EQ(ar_jobs[i]->result().outputs, want.outputs) << "AR job " << i;
    EXPECT_EQ(ar_jobs[i]->result().forwards, want.forwards);
    EXPECT_EQ(updates, 12 * n[i]);
  }
  for (size_t i = 0; i < dllm_jobs.size(); ++i) {
    GenerateResult want = generate(*dllm, {prompt}, dllm_params[i]).value();
    EXPECT_EQ(wait_for(*dllm_jobs[i]).outputs, want.outputs) << "diffusion job " << i;
  }
  EXPECT_EQ(ar_metrics.steps.load(), 12u * 4u) << "one step per token";
  EXPECT_EQ(ar_metrics.forwards.load(), 4u * 12u) << "a prefill + 11 tokens per choice";
  EXPECT_GT(dllm_metrics.forwards.load(), 0u);
}

TEST(GenerateScheduler, CancelledJobStopsAndTheNextRuns) {
  auto ar = tiny_ar_model();
  Metrics metrics;
  GenerateScheduler runner(*ar, metrics, {16, 8});
  GenerateParams p;
  p.gen_length = 200;
  p.stop_ids = std::vector<int32_t>{};
  auto long_job = std::make_shared<Job>(std::vector<std::vector<int32_t>>{{1, 2, 3}}, p, Updates::kLatest);
  p.gen_length = 4;
  auto short_job = std::make_shared<Job>(std::vector<std::vector<int32_t>>{{1, 2, 3}}, p, Updates::kNone);
  ASSERT_TRUE(runner.submit(long_job));
  ASSERT_TRUE(runner.submit(short_job));
  long_job->wait(std::chrono::milliseconds(5000));  // its first token
  long_job->cancel();
  GenerateResult r = wait_for(*long_job);
  EXPECT_TRUE(r.cancelled);
  EXPECT_LT(r.outputs[0].size(), 200u);
  EXPECT_EQ(wait_for(*short_job).outputs[0].size(), 4u);
  EXPECT_EQ(metrics.cancelled.load(), 1u);
  // A denoising job is not this runner's.
  auto dllm = tiny_model();
  GenerateParams d;
  d.gen_length = 8;
  EXPECT_FALSE(runner.submit(std::make_shared<Job>(
      make_denoise_loop(dllm->info(), std::vector<std::vector<int32_t>>{{1, 2}}, d), Updates::kNone)));
}

// An infill job answers with its window (the masks between prompt and suffix), streamed and at the end.
TEST(Scheduler, InfillJobAnswersItsWindow) {
  auto model = tiny_model();
  Metrics metrics;
  Scheduler scheduler(*model, metrics, {16, 8});
  const int32_t M = model->info().mask_id;
  const std::vector<int32_t> canvas = {1, 2, 3, M, M, M, M, M, M, M, M, 7, 8};
  GenerateParams p;
  p.steps = 8;
  auto job = std::make_shared<Job>(make_denoise_loop(model->info(), {canvas}, p, /*infill=*/true),
                                   Updates::kAll, Window{3, 8});
  ASSERT_TRUE(scheduler.submit(job));
  int64_t steps = 0;
  for (;;) {
    Job::News news = job->wait(std::chrono::milliseconds(1000));
    for (const StepUpdate& u : news.updates) {
      ++steps;
      ASSERT_EQ(u.canvas[0].size(), 8u);
      ASSERT_EQ(u.committed[0].size(), 1u);
      EXPECT_LT(u.committed[0][0], 8);
      EXPECT_EQ(u.final_prefix[0], 8);
    }
    if (news.ended) break;
  }
  EXPECT_EQ(steps, 8);
  GenerateResult want = infill(*model, {canvas}, p).value();
  ASSERT_FALSE(job->error());
  EXPECT_EQ(job->result().outputs[0],
            std::vector<int32_t>(want.outputs[0].begin() + 3, want.outputs[0].begin() + 11));
}

std::shared_ptr<Model> tiny_canvas_model() {
  LoadOptions o;
  o.precision = Precision::kF32;
  return Model::load(std::string(DLLM_SOURCE_DIR) + "/tests/data/dgemma/models/dgemma_tiny_f32", o).value();
}

// A uniform-state canvas model's jobs (DiffusionGemma) run through dllm::generate, a job's n rows as one
// batch: each gets what generate gives it alone, cut to its window (max_tokens need not fill whole canvases),
// and every update carries every row, final up to the committed canvases.
TEST(GenerateScheduler, CanvasModelJobsMatchGenerateAlone) {
  auto model = tiny_canvas_model();
  ASSERT_TRUE(model->canvas_decoder());
  const int64_t L = model->canvas_decoder()->canvas_length();
  Metrics metrics;
  GenerateScheduler runner(*model, metrics, {16, 8});
  const std::vector<int32_t> prompt = {2, 339, 406, 14, 408, 238};
  const int64_t window = 2 * L - 3;
  const int n[] = {1, 2};
  std::vector<GenerateParams> params(2);
  std::vector<std::shared_ptr<Job>> jobs;
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].seed = 1 + i;
    params[i].uniform_state.max_new_tokens = window;
    params[i].uniform_state.max_denoising_steps = 8;
    jobs.push_back(std::make_shared<Job>(std::vector<std::vector<int32_t>>(n[i], prompt), params[i],
                                         Updates::kAll, PromptRows::kBatched, Window{0, window}));
    EXPECT_EQ(jobs.back()->rows, n[i]);
    ASSERT_TRUE(runner.submit(jobs.back()));
  }
  uint64_t rows_run = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    int64_t updates = 0, last_forwards = 0;
    for (;;) {
      Job::News news = jobs[i]->wait(std::chrono::milliseconds(1000));
      for (const StepUpdate& u : news.updates) {
        ++updates;
        EXPECT_EQ(u.forwards, last_forwards + 1) << "one decoder forward per step";
        last_forwards = u.forwards;
        ASSERT_EQ(u.canvas.size(), static_cast<size_t>(n[i])) << "every row in each update";
        for (int r = 0; r < n[i]; ++r) {
          EXPECT_LE(static_cast<int64_t>(u.canvas[r].size()), window);
          EXPECT_TRUE(u.final_prefix[r] % L == 0 || u.final_prefix[r] == window) << u.final_prefix[r];
          EXPECT_EQ(u.final_prefix[r], std::min(u.block * L, window)) << "the committed canvases";
        }
      }
      if (news.ended) break;
    }
    ASSERT_FALSE(jobs[i]->error()) << *jobs[i]->error();
    GenerateResult want =
        generate(*model, std::vector<std::vector<int32_t>>(n[i], prompt), params[i]).value();
    ASSERT_EQ(want.outputs.size(), static_cast<size_t>(n[i]));
    for (auto& row : want.outputs) row.resize(std::min<size_t>(row.size(), window));
    EXPECT_EQ(jobs[i]->result().outputs, want.outputs) << "job " << i;
    EXPECT_EQ(jobs[i]->result().forwards, want.forwards);
    EXPECT_EQ(updates, want.forwards) << "an update per denoising step";
    rows_run += static_cast<uint64_t>(want.forwards * n[i]);
  }
  EXPECT_EQ(metrics.forward_rows.load(), rows_run) << "a step's forward runs the job's rows";
}

TEST(GenerateScheduler, CancelledCanvasJobStopsAndTheNextRuns) {
  auto model = tiny_canvas_model();
  Metrics metrics;
  GenerateScheduler runner(*model, metrics, {16, 8});
  GenerateParams p;
  p.uniform_state.max_new_tokens = 16;
  p.uniform_state.max_denoising_steps = 100000;  // never stable: every step would run
  p.uniform_state.stability_threshold = 1000;
  auto long_job = std::make_shared<Job>(std::vector<std::vector<int32_t>>{{2, 3, 4}}, p, Updates::kLatest,
                                        PromptRows::kBatched);
  p.uniform_state.max_denoising_steps = 4;
  auto short_job = std::make_shared<Job>(std::vector<std::vector<int32_t>>{{2, 3, 4}}, p, Updates::kNone,
                                         PromptRows::kBatched);
  ASSERT_TRUE(runner.submit(long_job));
  ASSERT_TRUE(runner.submit(short_job));
  long_job->wait(std::chrono::milliseconds(5000));  // its first step
  long_job->cancel();
  GenerateResult r = wait_for(*long_job);
  EXPECT_TRUE(r.cancelled);
  EXPECT_LT(r.forwards, 1000);
  EXPECT_EQ(wait_for(*short_job).outputs[0].size(), 16u);
  EXPECT_EQ(metrics.cancelled.load(), 1u);
}

}  // namespace
}  // namespace dllm::server
