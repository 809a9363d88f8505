#include "common.h"

#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "hub/hub.h"
#include "kernels/linear.h"
#include "kernels/quant/linear_packed.h"
#include "model/model_tokenizer.h"
#include "model/precision.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace dllm::cli {

std::string default_model_path() {
  return std::string(DLLM_SOURCE_DIR) + "/models/demo";
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string item;
  std::stringstream ss(text);
  while (std::getline(ss, item, ',')) {
    std::stringstream words(item);
    std::string word;
    while (words >> word) {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(word, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != word.size() || v < 0 || v > INT32_MAX) fail("--prompt-ids: '", word, "' is not a token id");
      ids.push_back(static_cast<int32_t>(v));
    }
  }
  return ids;
}

namespace {

// A flag that takes one of a few words: what each word means, and an error that lists them in this order (an
// unknown value is never a silent default).
template <class Meaning>
Meaning parse_word(const char* flag, const std::string& value,
                   std::initializer_list<std::pair<std::string_view, Meaning>> words) {
  std::string accepted;
  for (const auto& [word, meaning] : words) {
    if (value == word) return meaning;
    accepted += (accepted.empty() ? "" : ", ") + std::string(word);
  }
  fail(flag, ": '", value, "' is not one of ", accepted);
}

}  // namespace

Precision parse_dtype(const std::string& name) {
  return parse_word<Precision>("--dtype", name,
                               {{"auto", Precision::kAuto},
                                {"f32", Precision::kF32},
                                {"bf16", Precision::kBF16},
                                {"f16", Precision::kF16}});
}

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  if (!(in >> a >> b >> c)) return "";
  return a + " " + b + " " + c;
}

std::string dtype_label(Precision p) {
  return precision_name(p);
}

std::string& weights_flag() {
  static std::string value = "auto";
  return value;
}

std::string& experts_flag() {
  static std::string value = "first-use";
  return value;
}

ExpertPacking parse_experts(const std::string& name) {
  return parse_word<ExpertPacking>("--experts", name,
                                   {{"first-use", ExpertPacking::kOnFirstUse},
                                    {"load", ExpertPacking::kAtLoad},
                                    {"in-place", ExpertPacking::kInPlace}});
}

std::string& prepare_flag() {
  static std::string value = "background";
  return value;
}

WeightLayout parse_prepare(const std::string& name) {
  return parse_word<WeightLayout>("--prepare", name,
                                  {{"background", WeightLayout::kMappedThenBackground},
                                   {"load", WeightLayout::kBlockedAtLoad},
                                   {"never", WeightLayout::kMapped}});
}

WeightFormat parse_weights(const std::string& name) {
  return parse_word<WeightFormat>(
      "--weights", name,
      {{"auto", WeightFormat::kAuto}, {"f32", WeightFormat::kDequantize}, {"q8", WeightFormat::kQ8}});
}

void add_weights_option(CLI::App* cmd) {
  cmd->add_option(
         "--weights", weights_flag(),
         "GGUF weight matrices at run time: auto (Q8_0 / Q4_0 / Q4_K matrices packed into 16-row panels, "
         "experts and Q6_K multiplied in place from the file, int8 products; plain files as --dtype) | f32 "
         "(dequantised at load to --dtype) | q8 (all in 8 bits, Q8_0)")
      ->capture_default_str();
  cmd->add_option(
         "--experts", experts_flag(),
         "Mixture-of-experts models with Q8_0 / Q4_0 / Q4_K experts (--weights auto): first-use (each expert "
         "packed into 16-row panels like the dense matrices the first time a token is routed to it: loads as "
         "fast as in place, experts ~1.4x faster once packed, same resident size) | load (every expert "
         "packed "
         "at load: the whole file is read first) | in-place (multiplied from the mapped blocks, never "
         "packed)")
      ->capture_default_str();
  cmd->add_option(
         "--prepare", prepare_flag(),
         "Plain GGUF matrices multiplied in their stored type (f32 files in f32; AVX-512 CPUs, where "
         "oneDNN multiplies them fastest from its blocked layout): background (multiplied from the "
         "mapped file at once, so the first token comes within a second; reordered into the blocked "
         "layout by a background thread, same bits) | load (reordered before the first forward: 3-4 s "
         "for a 0.5B f32 file on 2 cores) | never (always from the mapping: 0.6-0.85x the speed)")
      ->capture_default_str();
}

std::string& backend_flag() {
  static std::string value = "cpu";
  return value;
}

int& device_flag() {
  static int value = 0;
  return value;
}

BackendKind parse_backend(const std::string& name) {
  return parse_word<BackendKind>("--backend", name,
                                 {{"cpu", BackendKind::kCpu}, {"vulkan", BackendKind::kVulkan}});
}

void add_backend_options(CLI::App* cmd) {
  cmd->add_option(
         "--backend", backend_flag(),
         "Where the forward runs: cpu (this machine's cores: oneDNN / OpenBLAS and our AVX2 / AVX-512 "
         "kernels) | vulkan (a Vulkan device, --device; `dllm devices` lists them: NVIDIA, AMD, Intel "
         "and Apple GPUs, Mesa's lavapipe on a CPU). The weights are copied to the device once, at load")
      ->capture_default_str();
  cmd->add_option("--device", device_flag(), "With --backend vulkan: the device's index in `dllm devices`")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

namespace {
void print_backend(const Model& model, bool quiet) {
  if (quiet) return;
  if (const auto* t = dynamic_cast<const Transformer*>(&model))
    std::fprintf(stderr, "dllm: backend %s\n", t->backend().describe().c_str());
}
}  // namespace

void use_backend_flags(Model& model, bool quiet) {
  const BackendKind kind = parse_backend(backend_flag());
  if (kind == BackendKind::kCpu) return;
  auto* t = dynamic_cast<Transformer*>(&model);
  if (!t) fail("--backend ", backend_flag(), ": this model does not run on a backend");
  t->set_backend(make_backend(kind, device_flag()));
  print_backend(model, quiet);
}

namespace {
bool& offline_flag() {
  static bool value = false;
  return value;
}
std::string& hf_token_flag() {
  static std::string value;
  return value;
}
}  // namespace

void add_hub_options(CLI::App* cmd) {
  cmd->add_flag("--offline", offline_flag(),
                "Never touch the network: a Hugging Face id (-m org/name) must be in the cache (as "
                "HF_HUB_OFFLINE=1)");
  cmd->add_option("--hf-token", hf_token_flag(),
                  "Token for gated or private Hugging Face repositories (default: $HF_TOKEN, else the token "
                  "`huggingface-cli login` stored)");
}

void apply_hub_flags(hub::HubSettings& settings) {
  if (offline_flag()) settings.offline = true;
  if (!hf_token_flag().empty()) settings.token = hf_token_flag();
}

std::string resolve_model(const std::string& path_or_id, bool quiet) {
  hub::ResolveOptions o;
  o.settings = hub::HubSettings::from_env();
  apply_hub_flags(o.settings);
  o.report.quiet = quiet;
  o.report.terminal = stderr_is_terminal();
  return hub::resolve_model_path(path_or_id, o);
}

std::shared_ptr<Model> load_model_or_throw(const std::string& given, Precision precision, int threads,
                                           bool quiet) {
  struct stat st {};
  if (given == default_model_path() && ::stat(given.c_str(), &st) != 0)
    fail("no model given (-m DIR) and the demo model ", given, " is not present");
  // Commands resolve -m first (the tokenizer beside the model needs the path too); this covers the others.
  const std::string path = resolve_model(given, quiet);
  LoadOptions o;
  o.precision = precision;
  o.threads = threads;
  o.weights = parse_weights(weights_flag());
  o.experts = parse_experts(experts_flag());
  o.layout = parse_prepare(prepare_flag());
  o.backend = parse_backend(backend_flag());
  o.device = device_flag();
  if (o.device != 0 && o.backend == BackendKind::kCpu)
    fail("--device ", o.device, " names a Vulkan device: add --backend vulkan");
  if (o.experts == ExpertPacking::kAtLoad && o.weights != WeightFormat::kAuto)
    fail("--experts load needs --weights auto (got --weights ", weights_flag(), ")");
  const auto t0 = std::chrono::steady_clock::now();
  auto model = Model::load(path, o).value();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet) {
    const auto& i = model->info();
    std::fprintf(
        stderr,
        "dllm: %s (%s, %s, %.1fM params, %lld layers, d=%lld, vocab %lld), %d threads, loaded in %.2f s\n"
        "dllm: precision %s%s (%s); per stored type: %s\n",
        path.c_str(), i.architecture.c_str(), i.autoregressive ? "autoregressive" : "diffusion",
        i.n_params / 1e6, static_cast<long long>(i.n_layers), static_cast<long long>(i.d_model),
        static_cast<long long>(i.vocab_size), omp_get_max_threads(), secs, dtype_label(i.precision).c_str(),
        i.precision == Precision::kBF16 && !bf16_matmul_supported()
            ? ": bf16 weights, f32 products (this CPU has no AVX512_BF16)"
        : i.precision == Precision::kF16 ? ": f16 weights, f32 activations and products"
                                         : "",
        i.precision_reason.c_str(), precision_by_type_line(i.precision_by_type).c_str());
    if (const auto* t = dynamic_cast<const Transformer*>(model.get()))
      std::fprintf(
          stderr,
          "dllm: weights %.1f MB, %lld of %lld matrices in 8 bits, %lld packed in 16-row panels (%s), "
          "%lld GGUF blocks in place (%s) (--weights %s)\n",
          t->weight_bytes() / 1e6, static_cast<long long>(t->q8_matrices()),
          static_cast<long long>(t->matrices()), static_cast<long long>(t->packed_matrices()),
          quant::LinearPacked::kernel_name(quant::LinearPacked::best_kernel()),
          static_cast<long long>(t->ggml_matrices()),
          quant::LinearGgml::kernel_name(quant::LinearGgml::best_kernel()), weights_flag().c_str());
    if (o.backend != BackendKind::kCpu) print_backend(*model, quiet);
  }
  return model;
}

bool stderr_is_terminal() {
  return ::isatty(2) != 0;
}
bool stdout_is_terminal() {
  return ::isatty(1) != 0;
}

}  // namespace dllm::cli

namespace dllm::cli {

void check_same_vocabulary(const std::string& model, const std::string& draft) {
  const ModelTokenizer mt = try_load_model_tokenizer(model, false),
                       dt = try_load_model_tokenizer(draft, false);
  if (!mt.tokenizer || !dt.tokenizer)
    fail("--draft: cannot compare the vocabularies of ", model, " and ", draft,
         " (a tokenizer is missing); the drafter must share the model's tokenizer");
  const Tokenizer &a = *mt.tokenizer, &b = *dt.tokenizer;
  const int32_t n = std::max(a.vocab_size(), b.vocab_size());
  for (int32_t id = 0; id < n; ++id)
    if (a.id_to_token(id) != b.id_to_token(id))
      fail("--draft: ", draft, " does not share the tokenizer of ", model, ": id ", id, " is '",
           b.id_to_token(id), "' there and '", a.id_to_token(id), "' here");
}

void add_draft_options(CLI::App* cmd, DraftParams& draft) {
  cmd->add_option("--draft-tokens", draft.tokens, "With --draft: tokens drafted per round")
      ->capture_default_str();
  cmd->add_option("--draft-steps", draft.steps,
                  "With --draft: denoising steps per draft (1 = all at once; sampling needs 1)")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--draft-cache",
         [&draft](const std::string& v) {
           if (v != "prefix" && v != "none")
             throw CLI::ValidationError("--draft-cache", "'" + v + "' is not one of: prefix, none");
           draft.cache = v == "prefix";
         },
         "With --draft: prefix = the drafter keeps the text's keys/values between rounds and runs only "
         "the new tokens and the masks (approximate drafts, same output); none = every round runs the "
         "whole text. Default: prefix")
      ->type_name("prefix|none");
}

}  // namespace dllm::cli
