// `dllm tokenize` and `dllm detokenize`: text <-> ids with a model's tokenizer.json, one JSON value per line.
//   dllm tokenize -t PATH [--special]          stdin: one JSON string per line  -> stdout: one JSON array of
//   ids dllm detokenize -t PATH [--skip-special]   stdin: one JSON array per line   -> stdout: one JSON
//   string dllm tokenize -t PATH --bench FILE [--repeat N]   encode FILE (single thread) and print MB/s
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "command.h"
#include "core/error.h"
#include "core/file.h"
#include "model/model_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace dllm::cli {
namespace {

struct TokenizeOptions {
  std::string path;
  bool special = false;
  std::string bench_file;
  int repeat = 5;
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Each repetition runs on a fresh thread, so the per-thread word cache starts cold (a fair single-pass
// number). Reports the best wall-clock time and the best CPU time of that thread (what one core achieves when
// the machine is shared with other work).
void run_bench(const Tokenizer& tok, const TokenizeOptions& o) {
  std::string text = read_whole_file(o.bench_file);
  if (text.empty()) fail(o.bench_file, ": file is empty");
  size_t n_ids = 0;
  double best_wall = 1e30, best_cpu = 1e30;
  int reps = std::max(1, o.repeat);
  for (int r = 0; r < reps; ++r) {
    std::thread worker([&] {
      auto t0 = std::chrono::steady_clock::now();
      double c0 = thread_cpu_seconds();
      n_ids = tok.encode(text, false).size();
      best_cpu = std::min(best_cpu, thread_cpu_seconds() - c0);
      best_wall =
          std::min(best_wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    });
    worker.join();
  }
  double mb = static_cast<double>(text.size()) / 1e6;
  std::printf(
      "%s: %.2f MB, %zu tokens, best of %d: wall %.3f s = %.2f MB/s; cpu %.3f s = %.2f MB/s (%.0f "
      "tokens/s)\n",
      o.bench_file.c_str(), mb, n_ids, reps, best_wall, mb / best_wall, best_cpu, mb / best_cpu,
      static_cast<double>(n_ids) / best_cpu);
}

void run_tokenize(const TokenizeOptions& o) {
  Tokenizer tok = load_model_tokenizer(o.path);
  if (!o.bench_file.empty()) {
    run_bench(tok, o);
    return;
  }
  std::string line;
  size_t lineno = 0;
  while (std::getline(std::cin, line)) {
    ++lineno;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("stdin line ", lineno, ": expected a JSON string: ", e.what());
    }
    if (!j.is_string()) fail("stdin line ", lineno, ": expected a JSON string, got ", j.type_name());
    std::cout << nlohmann::json(tok.encode(j.get_ref<const std::string&>(), o.special)).dump() << '\n';
  }
}

struct DetokenizeOptions {
  std::string path;
  bool skip_special = false;
};

void run_detokenize(const DetokenizeOptions& o) {
  Tokenizer tok = load_model_tokenizer(o.path);
  std::string line;
  size_t lineno = 0;
  while (std::getline(std::cin, line)) {
    ++lineno;
    std::vector<int32_t> ids;
    try {
      ids = nlohmann::json::parse(line).get<std::vector<int32_t>>();
    } catch (const nlohmann::json::exception& e) {
      fail("stdin line ", lineno, ": expected a JSON array of ids: ", e.what());
    }
    std::cout << nlohmann::json(tok.decode(ids, o.skip_special))
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
  }
}

const RegisterCommand kTokenize("tokenize", [](CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  auto* cmd =
      app.add_subcommand("tokenize", "Text to ids: one JSON string per stdin line -> one JSON array of ids");
  cmd->add_option(
         "-t,--tokenizer", o->path,
         "tokenizer.json, a model directory containing it, or a .gguf file (its tokenizer.ggml.* vocabulary)")
      ->required();
  cmd->add_flag("--special", o->special, "Add special tokens (run the post-processor, e.g. BOS)");
  cmd->add_option("--bench", o->bench_file, "Instead: encode this file (single thread) and print MB/s");
  cmd->add_option("--repeat", o->repeat, "Benchmark repetitions (best is reported)");
  cmd->callback([o] { run_tokenize(*o); });
});

const RegisterCommand kDetokenize("detokenize", [](CLI::App& app) {
  auto o = std::make_shared<DetokenizeOptions>();
  auto* cmd =
      app.add_subcommand("detokenize", "Ids to text: one JSON array per stdin line -> one JSON string");
  cmd->add_option(
         "-t,--tokenizer", o->path,
         "tokenizer.json, a model directory containing it, or a .gguf file (its tokenizer.ggml.* vocabulary)")
      ->required();
  cmd->add_flag("--skip-special", o->skip_special, "Leave out special tokens");
  cmd->callback([o] { run_detokenize(*o); });
});

}  // namespace
}  // namespace dllm::cli
