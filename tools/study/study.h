// The research harness behind `dllm study`: the held-out evaluation of a model trained on a corpus of files,
// of which a listed few were held out (models/demo: tools/train/heldout_files.txt under a Python 3.11
// standard library). Three parts:
//   loss   - masked-token cross-entropy and argmax accuracy over consecutive windows at fixed mask ratios
//   (the
//            model card's table, computed by the engine);
//   metric - infilling accuracy: random spans inside windows and whole suffixes filled with the exact
//   schedule; grid   - the scheduler study: one infill task under steps / threshold / block length / cache
//   settings, with
//            accuracy, forwards per token and tokens/s, and the fastest setting within X points of the exact
//            per-token schedule.
// A library apart from the engine (src/) and the product CLI (tools/cli/cmd_study.cpp only parses flags and
// writes files). docs/denoising.md "Held-out infill metric and scheduler study"; results in
// bench/results/scheduler_study.md, plotted by tools/study/plot_study.py.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dllm/dllm.h"
#include "tokenizer/tokenizer.h"

namespace dllm::study {

struct StudyConfig {
  std::vector<std::string> parts = {"loss", "metric", "grid"};
  int64_t window = 256;  // tokens per window (the model's training context)
  // loss
  std::vector<double> loss_ratios = {0.15, 0.3, 0.5, 0.7, 0.85};
  // metric
  int64_t metric_windows = 64;
  std::vector<int64_t> metric_spans = {8, 16, 32};
  std::vector<int64_t> metric_suffixes = {32, 64};
  // grid
  int64_t windows = 32;
  int64_t span = 32;
  std::vector<int64_t> block_lengths = {32, 8};
  std::vector<double> thresholds = {0.5, 0.7, 0.8, 0.9, 0.95, 0.99};
  std::vector<std::string> caches = {"none", "prefix", "dual"};
  std::vector<double> within = {1, 3};
  uint64_t seed = 0;
  bool quiet = false;  // no progress on stderr
};

// The held-out files, encoded as in tools/train/train.py: each file without special tokens, then EOS.
struct HeldoutStream {
  std::vector<int32_t> tokens;
  int64_t files = 0;
};
// `list`: one path a line (# comments), relative to `corpus`. Throws dllm::Error naming the list, the corpus
// or the missing file.
HeldoutStream read_heldout_stream(const std::string& list, const std::string& corpus, const Tokenizer& tok,
                                  int32_t eos);

// The looser measure beside exact-token accuracy: 1 - (token edit distance between `filled` and `truth`, n
// tokens each) / n, floored at 0. A fill that is right but shifted by one token scores near 1 here and near 0
// in exact-token accuracy (the usual failure of parallel decoding: a repeated or dropped token).
double token_similarity(const int32_t* filled, const int32_t* truth, int64_t n);

// The parts, each on the held-out stream.
nlohmann::json run_loss(Model& model, const std::vector<int32_t>& stream, const StudyConfig& c);
nlohmann::json run_metric(Model& model, const std::vector<int32_t>& stream, const StudyConfig& c);
// Also the grid's markdown table and answers (`markdown`).
nlohmann::json run_grid(Model& model, const std::vector<int32_t>& stream, const StudyConfig& c,
                        std::string* markdown);

// What is recorded with the numbers.
struct RunInfo {
  std::string command;  // the command line that produced the study
  std::string model;
  std::string dtype;
  int threads = 0;
  std::function<std::string()> load_average;  // read before and after the run ("0.00 0.01 0.05"), optional
  // When the command started (the recorded seconds include loading the model); default: run_study's start.
  std::optional<std::chrono::steady_clock::time_point> started;
};

struct StudyReport {
  nlohmann::json json;   // every number
  std::string markdown;  // the report (bench/results/scheduler_study.md)
};
// Throws dllm::Error naming the flag of a bad setting (an unknown part, ...): before the model is loaded.
void check_config(const StudyConfig& c);

// Every part of `c.parts` on `stream`.
StudyReport run_study(Model& model, const HeldoutStream& stream, const StudyConfig& c, const RunInfo& run);

// Mean and the half-width of a normal 95% interval of the mean.
std::pair<double, double> mean_ci(const std::vector<double>& v);
double median(std::vector<double> v);

}  // namespace dllm::study
