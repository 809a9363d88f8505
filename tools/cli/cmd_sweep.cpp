// `dllm sweep`: one prompt set under several denoising settings (schedules, Fast-dLLM threshold / factor,
// prefix and dual caches) and, per setting, forwards per generated token, tokens run through the model,
// tokens/s, and agreement with the exact reference schedule (share of identical generated tokens).
// docs/denoising.md.
#include <omp.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "command.h"
#include "common.h"
#include "core/error.h"
#include "model/random_model.h"

namespace dllm::cli {
namespace {

struct SweepOptions {
  std::string model;
  std::string shape;
  int64_t layers = 0;
  std::vector<std::string> prompt_ids;
  int64_t num_prompts = 4, prompt_len = 16;
  int64_t gen_length = 64, block_length = 16;
  double threshold = 0.9, factor = 1.0;
  std::string dtype = "auto";
  int threads = 0;
  bool json = false;
};

struct Setting {
  std::string name;
  GenerateParams params;
};

// Block-diffusion models (LLaDA2, SDAR): the official loops with the block cache off (the reference, every
// step recomputes the prefix) and on (exact: the same tokens, fewer tokens run), and the faster settings of
// each.
std::vector<Setting> block_settings(const SweepOptions& o, const ModelInfo& mi) {
  GenerateParams base;
  base.gen_length = o.gen_length;
  base.block_length = o.block_length;
  auto make = [&](BlockLoop loop, CacheMode cache, auto fn) {
    GenerateParams p = base;
    p.block_loop = loop;
    p.cache = cache;
    fn(p);
    return p;
  };
  auto none = [](GenerateParams&) {};
  const int64_t B = o.block_length;
  auto one_per_step = [B](GenerateParams& p) { p.steps = B; };
  std::vector<Setting> out;
  if (mi.architecture == "sdar") {
    auto seq = [&](GenerateParams& p) {
      p.steps = B;
      p.unmask = Unmask::kSequential;
    };
    auto dyn = [&](GenerateParams& p) {
      p.steps = B;
      p.unmask = Unmask::kLowConfidenceDynamic;
      p.block_threshold = o.threshold;
    };
    out = {{"sdar sequential, no cache", make(BlockLoop::kSdar, CacheMode::kNone, seq)},
           {"sdar sequential + block cache", make(BlockLoop::kSdar, CacheMode::kBlock, seq)},
           {"sdar dynamic, no cache", make(BlockLoop::kSdar, CacheMode::kNone, dyn)},
           {"sdar dynamic + block cache", make(BlockLoop::kSdar, CacheMode::kBlock, dyn)}};
  } else {
    auto thr = [&](GenerateParams& p) {
      p.steps = B;
      p.block_threshold = o.threshold;
    };
    out = {{"llada2.0 1/step, no cache", make(BlockLoop::kLlada20, CacheMode::kNone, one_per_step)},
           {"llada2.0 1/step + block cache", make(BlockLoop::kLlada20, CacheMode::kBlock, one_per_step)},
           {"llada2.0 threshold, no cache", make(BlockLoop::kLlada20, CacheMode::kNone, thr)},
           {"llada2.0 threshold + block cache", make(BlockLoop::kLlada20, CacheMode::kBlock, thr)},
           {"llada2.1 default, no cache", make(BlockLoop::kLlada21, CacheMode::kNone, none)},
           {"llada2.1 default + block cache", make(BlockLoop::kLlada21, CacheMode::kBlock, none)}};
  }
  for (auto& s : out) s.params.stop_ids = std::vector<int32_t>{};  // whole canvases: comparable lengths
  return out;
}

std::vector<Setting> settings(const SweepOptions& o) {
  GenerateParams exact;
  exact.gen_length = o.gen_length;
  exact.block_length = o.block_length;
  exact.steps = o.gen_length;  // one token per step: the exact per-token schedule
  exact.unmask = Unmask::kConfidence;
  exact.transfer = Transfer::kUniform;
  auto with = [&](auto fn) {
    GenerateParams p = exact;
    fn(p);
    return p;
  };
  auto thr = [&](GenerateParams& p) {
    p.transfer = Transfer::kThreshold;
    p.threshold = o.threshold;
  };
  auto fac = [&](GenerateParams& p) {
    p.transfer = Transfer::kFactor;
    p.factor = o.factor;
  };
  char t[32], f[32];
  std::snprintf(t, sizeof t, "threshold %.2f", o.threshold);
  std::snprintf(f, sizeof f, "factor %.2f", o.factor);
  const std::string ts = t, fs = f;
  return {
      {"exact (1 token/step)", exact},
      {"steps = gen/2", with([&](GenerateParams& p) { p.steps = o.gen_length / 2; })},
      {"steps = gen/4", with([&](GenerateParams& p) { p.steps = o.gen_length / 4; })},
      {"exact + prefix cache", with([&](GenerateParams& p) { p.cache = CacheMode::kPrefix; })},
      {"exact + dual cache", with([&](GenerateParams& p) { p.cache = CacheMode::kDual; })},
      {ts, with(thr)},
      {ts + " + prefix cache", with([&](GenerateParams& p) { thr(p), p.cache = CacheMode::kPrefix; })},
      {ts + " + dual cache", with([&](GenerateParams& p) { thr(p), p.cache = CacheMode::kDual; })},
      {fs + " + dual cache", with([&](GenerateParams& p) { fac(p), p.cache = CacheMode::kDual; })},
  };
}

void run_sweep(const SweepOptions& o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  if (o.model.empty() == o.shape.empty()) fail("give either -m DIR or --shape NAME");
  if (o.gen_length <= 0 || o.block_length <= 0 || o.gen_length % o.block_length != 0)
    fail("--gen-length ", o.gen_length, " must be a positive multiple of --block-length ", o.block_length);
  const Precision compute = parse_dtype(o.dtype);
  std::shared_ptr<Model> model = o.model.empty()
                                     ? make_random_model(find_shape(o.shape), o.layers, compute, 1234)
                                     : load_model_or_throw(o.model, compute, o.threads, true);
  const ModelInfo& mi = model->info();
  const bool block_model = mi.block_size > 0;
  if (!block_model && (o.gen_length % 4 != 0 || (o.gen_length / 4) % (o.gen_length / o.block_length) != 0))
    fail("--gen-length ", o.gen_length, ": gen/4 steps must split evenly over the blocks");
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& text : o.prompt_ids) prompts.push_back(parse_ids(text));
  if (prompts.empty()) {
    // Seeded random prompts that avoid the special ids.
    std::mt19937 rng(42);
    const int32_t hi = static_cast<int32_t>(std::min<int64_t>(mi.vocab_size, 400)) - 1;
    std::uniform_int_distribution<int32_t> id(1, hi);
    for (int64_t i = 0; i < o.num_prompts; ++i) {
      std::vector<int32_t> p;
      while (static_cast<int64_t>(p.size()) < o.prompt_len) {
        const int32_t t = id(rng);
        if (t != mi.mask_id && t != mi.eos_id && t != mi.pad_id && t != mi.bos_id) p.push_back(t);
      }
      prompts.push_back(p);
    }
  }

  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::vector<int32_t>> reference;
  double exact_seconds = 0;
  if (!o.json)
    std::printf("model %s (%s), %zu prompts, gen %lld, block %lld\n%-30s %9s %12s %10s %9s %9s\n",
                o.model.empty() ? o.shape.c_str() : o.model.c_str(), mi.architecture.c_str(), prompts.size(),
                static_cast<long long>(o.gen_length), static_cast<long long>(o.block_length), "setting",
                "fwd/token", "tokens run", "tokens/s", "speed-up", "agree");
  for (const auto& s : block_model ? block_settings(o, mi) : settings(o)) {
    int64_t forwards = 0, forward_tokens = 0, same = 0, total = 0;
    double seconds = 0;
    std::vector<std::vector<int32_t>> outputs;
    for (const auto& prompt : prompts) {
      auto r = generate(*model, {prompt}, s.params).value();
      forwards += r.forwards;
      forward_tokens += r.forward_tokens;
      seconds += r.seconds;
      outputs.push_back(r.outputs[0]);
    }
    if (reference.empty()) {
      reference = outputs;
      exact_seconds = seconds;
    }
    // Outputs may end early (a stop token): positions past the shorter one count as disagreement.
    for (size_t i = 0; i < outputs.size(); ++i) {
      const size_t n = std::max(outputs[i].size(), reference[i].size());
      for (size_t j = 0; j < n; ++j, ++total)
        same += j < outputs[i].size() && j < reference[i].size() && outputs[i][j] == reference[i][j];
    }
    const double generated = static_cast<double>(prompts.size() * o.gen_length);
    const double agree = static_cast<double>(same) / static_cast<double>(total);
    const double speedup = seconds > 0 ? exact_seconds / seconds : 0;
    rows.push_back({{"setting", s.name},
                    {"forwards", forwards},
                    {"forwards_per_token", forwards / generated},
                    {"forward_tokens", forward_tokens},
                    {"seconds", seconds},
                    {"tokens_per_second", generated / seconds},
                    {"speedup_vs_exact", speedup},
                    {"agreement", agree},
                    {"outputs", outputs}});
    if (!o.json)
      std::printf("%-30s %9.3f %12lld %10.1f %8.2fx %8.1f%%\n", s.name.c_str(), forwards / generated,
                  static_cast<long long>(forward_tokens), generated / seconds, speedup, 100 * agree);
    std::fflush(stdout);
  }
  if (o.json)
    std::printf("%s\n", nlohmann::json({{"model", o.model.empty() ? o.shape : o.model},
                                        {"architecture", mi.architecture},
                                        {"prompts", prompts.size()},
                                        {"gen_length", o.gen_length},
                                        {"block_length", o.block_length},
                                        {"settings", rows}})
                            .dump()
                            .c_str());
}

void setup(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  auto* cmd = app.add_subcommand(
      "sweep",
      "Run one prompt set under several denoising settings (schedules, threshold/factor, caches; for "
      "block-diffusion models the official loops with the block cache off and on) and report forwards/token, "
      "tokens run, tokens/s, speed-up and agreement with the first (exact) setting");
  cmd->add_option("-m,--model", o->model, "Model directory");
  cmd->add_option("--shape", o->shape, "Random model of a named shape instead of -m (see dllm bench --help)");
  cmd->add_option("--layers", o->layers, "With --shape: number of layers (0 = the shape's own)")
      ->capture_default_str();
  cmd->add_option("--prompt-ids", o->prompt_ids,
                  "Prompt token ids, comma separated; repeat for more prompts "
                  "(default: --num-prompts seeded random prompts)");
  cmd->add_option("--num-prompts", o->num_prompts, "Random prompts when no --prompt-ids")
      ->capture_default_str();
  cmd->add_option("--prompt-len", o->prompt_len, "Length of the random prompts")->capture_default_str();
  cmd->add_option("--gen-length", o->gen_length, "Generated tokens per prompt")->capture_default_str();
  cmd->add_option("--block-length", o->block_length, "Semi-autoregressive block length")
      ->capture_default_str();
  cmd->add_option("--threshold", o->threshold,
                  "Fast-dLLM confidence threshold (block models: the LLaDA2.0 / SDAR dynamic threshold)")
      ->capture_default_str();
  cmd->add_option("--factor", o->factor, "Fast-dLLM factor")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, kDtypeHelp)->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (0 = all cores)")->capture_default_str();
  cmd->add_flag("--json", o->json, "One JSON object instead of the table");
  cmd->callback([o] { run_sweep(*o); });
}

RegisterCommand reg("sweep", setup);

}  // namespace
}  // namespace dllm::cli
