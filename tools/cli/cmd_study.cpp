// `dllm study`: the held-out evaluation and scheduler study of tools/study (study.h), from the command line:
// flags in, the JSON and markdown report out. The corpus the held-out files come from is an argument.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "command.h"
#include "common.h"
#include "core/error.h"
#include "model/model_tokenizer.h"
#include "study/study.h"

namespace dllm::cli {
namespace {

struct StudyOptions {
  std::string model = default_model_path();
  std::string heldout_list = std::string(DLLM_SOURCE_DIR) + "/tools/train/heldout_files.txt";
  std::string corpus;
  // Comma-separated lists, parsed into `config`.
  std::string parts = "loss,metric,grid";
  std::string loss_ratios = "0.15,0.3,0.5,0.7,0.85";
  std::string metric_spans = "8,16,32";
  std::string metric_suffixes = "32,64";
  std::string block_lengths = "32,8";
  std::string thresholds = "0.5,0.7,0.8,0.9,0.95,0.99";
  std::string caches = "none,prefix,dual";
  study::StudyConfig config;
  std::string dtype = "f32";
  int threads = 1;
  std::string out_json, out_md;
};

template <class T>
std::vector<T> parse_list(const std::string& text, const char* flag) {
  std::vector<T> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    try {
      if constexpr (std::is_same_v<T, double>)
        out.push_back(std::stod(item));
      else if constexpr (std::is_same_v<T, int64_t>)
        out.push_back(std::stoll(item));
      else
        out.push_back(item);
    } catch (const std::exception&) {
      fail(flag, ": '", item, "' is not a valid item");
    }
  }
  return out;
}

// The command as typed, for the report (arguments with spaces or quotes quoted, except comma lists).
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), out;
  size_t start = 0;
  while (start < all.size()) {
    const size_t end = all.find('\0', start);
    std::string arg = all.substr(start, end - start);
    if (arg.find_first_of(" ,'\"") != std::string::npos && arg.find(',') == std::string::npos)
      arg = "'" + arg + "'";
    out += (out.empty() ? "" : " ") + arg;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

void run(StudyOptions o) {
  const auto started = std::chrono::steady_clock::now();
  study::StudyConfig& c = o.config;
  c.parts = parse_list<std::string>(o.parts, "--parts");
  c.loss_ratios = parse_list<double>(o.loss_ratios, "--loss-ratios");
  c.metric_spans = parse_list<int64_t>(o.metric_spans, "--metric-spans");
  c.metric_suffixes = parse_list<int64_t>(o.metric_suffixes, "--metric-suffixes");
  c.block_lengths = parse_list<int64_t>(o.block_lengths, "--block-lengths");
  c.thresholds = parse_list<double>(o.thresholds, "--thresholds");
  c.caches = parse_list<std::string>(o.caches, "--caches");
  study::check_config(c);
  if (o.corpus.empty())
    fail("study: no corpus: --corpus DIR is the directory the paths in ", o.heldout_list,
         " are relative to (models/demo: the Python 3.11 standard library it was trained on, e.g. "
         "--corpus /usr/lib/python3.11)");
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const Tokenizer tok = load_model_tokenizer(o.model);
  auto model = load_model_or_throw(o.model, parse_dtype(o.dtype), o.threads, c.quiet);
  const study::HeldoutStream stream =
      study::read_heldout_stream(o.heldout_list, o.corpus, tok, model->info().eos_id);
  const study::StudyReport report =
      study::run_study(*model, stream, c, {command_line(), o.model, o.dtype, o.threads, loadavg, started});
  if (!o.out_json.empty()) {
    std::ofstream f(o.out_json);
    f << report.json.dump(1) << "\n";
    if (!f) fail(o.out_json, ": cannot write");
  }
  if (!o.out_md.empty()) {
    std::ofstream f(o.out_md);
    f << report.markdown;
    if (!f) fail(o.out_md, ": cannot write");
  }
  std::printf("%s", report.markdown.c_str());
}

void setup(CLI::App& app) {
  auto o = std::make_shared<StudyOptions>();
  study::StudyConfig& c = o->config;
  auto* cmd = app.add_subcommand(
      "study",
      "Held-out evaluation of a model on the files held out of its training corpus: masked-token loss, "
      "infill "
      "accuracy of spans / suffixes, and the scheduler study (steps, threshold, block length, cache vs "
      "accuracy and tokens/s; the fastest setting within X points of exact). Needs the corpus: --corpus DIR "
      "(models/demo: a Python 3.11 standard library, e.g. /usr/lib/python3.11). Results and the command of "
      "record: bench/results/scheduler_study.md");
  cmd->add_option("-m,--model", o->model, "Model directory")->capture_default_str();
  cmd->add_option(
      "--corpus,--heldout-root", o->corpus,
      "Required: the directory the held-out list's paths are relative to (models/demo: the Python "
      "3.11 standard library)");
  cmd->add_option("--heldout-list", o->heldout_list,
                  "Held-out file list (one path a line, # comments; default: models/demo's)")
      ->capture_default_str();
  cmd->add_option("--parts", o->parts, "Which parts: loss, metric, grid (comma separated)")
      ->capture_default_str();
  cmd->add_option("--window", c.window, "Window length in tokens (the model's training context)")
      ->capture_default_str();
  cmd->add_option("--loss-ratios", o->loss_ratios, "loss: mask ratios")->capture_default_str();
  cmd->add_option("--metric-windows", c.metric_windows, "metric: windows per task")->capture_default_str();
  cmd->add_option("--metric-spans", o->metric_spans, "metric: span lengths")->capture_default_str();
  cmd->add_option("--metric-suffixes", o->metric_suffixes, "metric: suffix lengths")->capture_default_str();
  cmd->add_option("--windows", c.windows, "grid: windows")->capture_default_str();
  cmd->add_option("--span", c.span, "grid: span length (gen_length of every setting)")->capture_default_str();
  cmd->add_option("--block-lengths", o->block_lengths, "grid: block lengths")->capture_default_str();
  cmd->add_option("--thresholds", o->thresholds, "grid: Fast-dLLM thresholds")->capture_default_str();
  cmd->add_option("--caches", o->caches, "grid: cache modes")->capture_default_str();
  cmd->add_option("--within", c.within, "grid: answer for these accuracy margins (points)")
      ->capture_default_str();
  cmd->add_option("--seed", c.seed, "Seed of the window order, span places and loss masks")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, kDtypeHelp)->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--out-json", o->out_json, "Write every number here");
  cmd->add_option("--out-md", o->out_md, "Write the markdown report here (also printed)");
  cmd->add_flag("-q,--quiet", c.quiet, "No progress on stderr");
  cmd->callback([o] { run(*o); });
}

RegisterCommand registration("study", setup);

}  // namespace
}  // namespace dllm::cli
