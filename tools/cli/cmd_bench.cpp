// `dllm bench`: time forward passes of a model (a directory, or a random model of a named shape) and report
// tokens/s, achieved GFLOP/s and the fraction of this machine's measured peak, with a per-kernel breakdown.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <thread>

#include "ar/ar_session.h"
#include "bench_canvas.h"
#include "cache/kv_cache.h"
#include "command.h"
#include "common.h"
#include "convert/random_gguf.h"
#include "core/error.h"
#include "kernels/linear.h"
#include "kernels/peak.h"
#include "kernels/profile.h"
#include "kernels/quant/linear_ggml.h"
#include "model/random_model.h"
#include "model/transformer.h"

namespace dllm::cli {
namespace {

struct BenchOptions {
  std::string model;
  std::string shape;
  int64_t layers = 0;
  int64_t tokens = 256;
  int64_t batch = 1;
  int64_t logits_from = 0;
  int64_t context = 0;
  int repeat = 5;
  std::string dtype = "auto";
  int threads = 0;
  bool json = false;
  bool ar = false;  // autoregressive: prompt processing and token generation, as llama-bench
  int64_t pp = 256, tg = 64;
  int64_t first_tokens = 64;  // the canvas of the cold start's first forward
  bool generate = false;      // canvas models: also a generate() at the released sampler settings
  std::string random_file;    // canvas-model shapes: where the random GGUF goes (kept for reuse)
};

// A canvas-model shape (DiffusionGemma) runs from a random GGUF file, memory-mapped as a real one: written
// once (block by block, never the whole model in memory), then reused.
std::shared_ptr<Model> random_canvas_model(const BenchOptions& o, Precision precision) {
  const ModelShape& shape = find_shape(o.shape);
  nlohmann::json config = nlohmann::json::parse(shape.config);
  if (o.layers > 0) {
    config["text_config"]["num_hidden_layers"] = o.layers;
    if (config["text_config"].contains("layer_types")) {
      auto& types = config["text_config"]["layer_types"];
      while (static_cast<int64_t>(types.size()) > o.layers) types.erase(types.size() - 1);
      while (static_cast<int64_t>(types.size()) < o.layers) types.push_back("sliding_attention");
      types[types.size() - 1] = "full_attention";
    }
  }
  std::string weights = weights_flag();
  if (weights == "auto") weights = "q4_k";  // the size people run: a 26B model in ~15 GB
  if (weights != "f32" && weights != "q8_0" && weights != "q4_k")
    fail("--weights ", weights, ": a random ", shape.name, " file holds f32, q8_0 or q4_k matrices");
  std::string path = o.random_file;
  if (path.empty())
    path = (std::filesystem::temp_directory_path() /
            ("dllm-random-" + shape.name + (o.layers > 0 ? "-" + std::to_string(o.layers) + "L" : "") + "-" +
             weights + ".gguf"))
               .string();
  if (!std::filesystem::exists(path)) {
    if (!o.json)
      std::fprintf(stderr, "dllm: writing a random %s file to %s\n", shape.name.c_str(), path.c_str());
    const std::string partial = path + ".partial";
    write_random_diffusion_gemma_gguf(
        config, parse_gguf_type(weights), partial, 1234, [&](const ConvertProgress& p) {
          if (!o.json && stderr_is_terminal())
            std::fprintf(stderr, "\r  %3.0f%% of %.1f GB",
                         p.total_bytes ? 100.0 * p.bytes / p.total_bytes : 100.0, p.total_bytes / 1e9);
        });
    if (!o.json && stderr_is_terminal()) std::fprintf(stderr, "\n");
    std::filesystem::rename(partial, path);
  } else if (!o.json) {
    std::fprintf(stderr, "dllm: reusing %s (delete it to write a new one)\n", path.c_str());
  }
  return load_model_or_throw(path, precision, o.threads, o.json);
}

CanvasBenchOptions canvas_options(const BenchOptions& o) {
  CanvasBenchOptions c;
  if (o.context > 0) c.context = o.context;
  c.repeat = o.repeat;
  c.generate = o.generate;
  c.json = o.json;
  return c;
}

// A replica's cold start (-m only): the load, then the first denoising forward of a short request (a
// --first-tokens canvas: a short prompt and its answer's masks; its first committed token comes out of this
// forward), then the wait until background preparation (WeightLayout) is done, so that the timed forwards
// measure the steady state.
struct ColdStart {
  double load_seconds = 0, first_forward_seconds = 0, prepared_after_seconds = 0;
  int64_t first_tokens = 0;
  nlohmann::json to_json() const {
    return {{"load_seconds", load_seconds},
            {"first_forward_seconds", first_forward_seconds},
            {"load_to_first_token_seconds", load_seconds + first_forward_seconds},
            {"first_forward_tokens", first_tokens},
            {"weights_prepared_after_seconds", prepared_after_seconds}};
  }
};

ColdStart measure_cold_start(Model& model, double load_seconds, int64_t first_tokens) {
  ColdStart c;
  c.load_seconds = load_seconds;
  c.first_tokens = first_tokens;
  const ModelInfo& mi = model.info();
  std::vector<int32_t> tokens(static_cast<size_t>(first_tokens));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = i < tokens.size() / 4 || mi.mask_id < 0
                    ? static_cast<int32_t>((i * 7919 + 13) % mi.vocab_size)
                    : mi.mask_id;
  ForwardInput in;
  in.tokens = tokens;
  in.logits_from = static_cast<int64_t>(tokens.size() / 4);
  const auto t0 = std::chrono::steady_clock::now();
  model.forward(in).value();
  c.first_forward_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  while (model.weights_prepared() < 1.0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  c.prepared_after_seconds =
      load_seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Multiply-adds x2 of one forward: the linear layers, attention's two matmuls, and the head on the kept rows.
struct FlopCount {
  double linear = 0, attention = 0, head = 0;
  double total() const { return linear + attention + head; }
};

// Mixture-of-experts layers count the active parameters: the router, the chosen experts and the shared one.
// `context` cached positions add to the keys each query attends to.
FlopCount count_flops(const TransformerConfig& c, int64_t batch, int64_t seq, int64_t logits_from,
                      int64_t context) {
  const ModelInfo& m = c.info;
  const double n = static_cast<double>(batch * seq), d = m.d_model;
  const double q_dim = m.n_heads * m.head_dim, kv_dim = m.n_kv_heads * m.head_dim;
  FlopCount f;
  for (int64_t l = 0; l < m.n_layers; ++l) {
    double per_token = d * (q_dim + 2 * kv_dim) + q_dim * d;
    if (c.is_moe_layer(l))
      per_token += d * c.moe.experts + 3.0 * d * c.moe.expert_ffn * (c.moe.used + c.moe.shared);
    else
      per_token += 3.0 * d * m.ffn_hidden;
    f.linear += 2.0 * n * per_token;
  }
  f.attention =
      4.0 * batch * static_cast<double>(seq) * static_cast<double>(context + seq) * q_dim * m.n_layers;
  f.head = 2.0 * batch * (seq - logits_from) * d * m.vocab_size;
  return f;
}

// The peak the floating-point products are held to. vdpbf16ps does two multiply-adds per f32 lane: the bf16
// peak is twice the f32 FMA peak where it exists; where AMX-BF16 is, oneDNN multiplies on tiles, and its
// measured tdpbf16ps peak applies. Without bf16 hardware, bf16 weights are multiplied in f32: the f32 FMA
// peak applies.
std::pair<double, const char*> float_product_peak(Precision precision, double peak_f32) {
  const bool bf16_math = precision == Precision::kBF16 && bf16_matmul_supported();
  const double peak_amx_bf16 = bf16_math ? measure_amx_bf16_peak_gflops(0.5) : 0;
  if (peak_amx_bf16 > 0) return {peak_amx_bf16, "bf16 (AMX-BF16 tdpbf16ps)"};
  if (bf16_math) return {2 * peak_f32, "bf16 (2x f32 FMA)"};
  return {peak_f32, "f32 FMA"};
}

// --ar: llama-bench's two numbers for an autoregressive model. pp: a fresh prompt of `pp` tokens in one
// causal forward (tokens/s, GFLOP/s and % of the f32 FMA peak); tg: `tg` tokens one forward each after a
// one-token prompt (tokens/s, the weight bytes each token reads, and that rate against the measured memory
// bandwidth).
void run_ar_bench(const BenchOptions& o, Model& model, Transformer& transformer) {
  const ModelInfo& mi = model.info();
  if (!mi.autoregressive)
    fail("--ar times autoregressive models; ", mi.architecture, " is a diffusion model");
  if (o.pp <= 0 || o.tg <= 0) fail("--pp and --tg must be > 0");
  std::vector<int32_t> prompt(static_cast<size_t>(o.pp));
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<int32_t>((i * 7919 + 13) % mi.vocab_size);
  double peak_f32 = measure_f32_fma_peak_gflops(0.5);
  auto seconds = [](auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  {
    ArSession warm(model);
    warm.advance(prompt);
  }  // warm-up: primitive creation, page faults
  std::vector<double> pp_times, tg_times;
  for (int r = 0; r < o.repeat; ++r) {
    ArSession s(model);
    pp_times.push_back(seconds([&] { s.advance(prompt); }));
  }
  // tg's kernels are timed (one clock read per kernel call), so the report can say where a token's time goes
  // and how fast the matrices alone stream.
  KernelProfile::reset();
  transformer.reset_matmul_role_stats();
  for (int r = 0; r < o.repeat; ++r) {
    ArSession s(model);
    s.advance(std::span<const int32_t>(prompt.data(), 1));
    KernelProfile::enabled = true;
    tg_times.push_back(seconds([&] {
      int32_t token = prompt[0];
      for (int64_t i = 0; i < o.tg; ++i) {
        const auto logits = s.advance(std::span<const int32_t>(&token, 1));
        token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      }
    }));
    KernelProfile::enabled = false;
  }
  peak_f32 = std::max(peak_f32, measure_f32_fma_peak_gflops(0.5));
  const auto [peak, peak_kind] = float_product_peak(mi.precision, peak_f32);
  const double bandwidth = measure_memory_read_gbs(0.5);
  const bool int8_products =
      transformer.packed_matrices() + transformer.ggml_matrices() + transformer.q8_matrices() > 0;
  const double peak_int8 = int8_products ? measure_int8_dot_peak_gops(0.5) : 0;
  const double pp_t = median(pp_times), tg_t = median(tg_times);
  // Causal attention does about half the products of the bidirectional count.
  FlopCount f = count_flops(transformer.config(), 1, o.pp, o.pp - 1, 0);
  f.attention /= 2;
  const double pp_gflops = f.total() / pp_t / 1e9, pp_tok_s = static_cast<double>(o.pp) / pp_t;
  const double tg_tok_s = static_cast<double>(o.tg) / tg_t;
  // Every matrix (the head included) is read once per generated token; of the embedding table, one row.
  const double bytes_per_token = static_cast<double>(transformer.matrix_bytes());
  const double tg_gbs = bytes_per_token * tg_tok_s / 1e9;
  const double tg_total = std::accumulate(tg_times.begin(), tg_times.end(), 0.0);
  nlohmann::json tg_breakdown = nlohmann::json::object();
  double kernel_sum = 0;
  for (int k = 0; k < static_cast<int>(KernelKind::kCount); ++k) {
    kernel_sum += KernelProfile::seconds[k];
    tg_breakdown[KernelProfile::name(static_cast<KernelKind>(k))] = KernelProfile::seconds[k] / tg_total;
  }
  tg_breakdown["rest (embedding, glue, sampling)"] = std::max(0.0, 1.0 - kernel_sum / tg_total);
  // The matrices' own streaming rate: every matrix's bytes per token over the time inside matmul kernels.
  const double tg_tokens_timed = static_cast<double>(o.tg * o.repeat);
  const double tg_matmul_gbs =
      bytes_per_token * tg_tokens_timed / KernelProfile::seconds[static_cast<int>(KernelKind::kMatmul)] / 1e9;
  // Each role's matrices: their GB/s while they ran, and their share of the token's time.
  nlohmann::json by_role = nlohmann::json::object();
  const Transformer::MatmulRoleStats& roles = transformer.matmul_role_stats();
  for (int r = 0; r < static_cast<int>(Transformer::MatmulRole::kCount); ++r) {
    if (roles.seconds[r] <= 0) continue;
    const double gbs = roles.bytes[r] / roles.seconds[r] / 1e9;
    by_role[Transformer::matmul_role_name(static_cast<Transformer::MatmulRole>(r))] = {
        {"gb_per_s", gbs},
        {"fraction_of_bandwidth", gbs / bandwidth},
        {"time_fraction", roles.seconds[r] / tg_total},
        {"mb_per_token", roles.bytes[r] / tg_tokens_timed / 1e6}};
  }
  if (o.json) {
    nlohmann::json out = {
        {"model", mi.path},
        {"architecture", mi.architecture},
        {"compute", dtype_label(mi.precision)},
        {"precision", mi.precision_by_type},
        {"threads", omp_get_max_threads()},
        {"load_average_before", loadavg()},
        {"pp", o.pp},
        {"tg", o.tg},
        {"pp_tokens_per_second", pp_tok_s},
        {"pp_gflops", pp_gflops},
        {"peak_f32_fma_gflops_measured", peak_f32},
        {"peak_gflops", peak},
        {"peak_kind", peak_kind},
        {"pp_fraction_of_peak", pp_gflops / peak},
        {"peak_int8_gops_measured", int8_products ? nlohmann::json(peak_int8) : nullptr},
        {"pp_fraction_of_int8_peak", int8_products ? nlohmann::json(pp_gflops / peak_int8) : nullptr},
        {"tg_tokens_per_second", tg_tok_s},
        {"weight_gb", bytes_per_token / 1e9},
        {"tg_gb_per_s", tg_gbs},
        {"memory_read_gb_per_s_measured", bandwidth},
        {"tg_fraction_of_bandwidth", tg_gbs / bandwidth},
        {"tg_matmul_gb_per_s", tg_matmul_gbs},
        {"tg_matmul_fraction_of_bandwidth", tg_matmul_gbs / bandwidth},
        {"tg_time_fraction", tg_breakdown},
        {"tg_matmul_by_role", by_role},
        {"pp_seconds_all", pp_times},
        {"tg_seconds_all", tg_times}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("model      %s (%s, %lld layers, d=%lld, vocab %lld), %d threads, weights %.3f GB\n",
              mi.path.c_str(), mi.architecture.c_str(), static_cast<long long>(mi.n_layers),
              static_cast<long long>(mi.d_model), static_cast<long long>(mi.vocab_size),
              omp_get_max_threads(), bytes_per_token / 1e9);
  std::printf(
      "pp%-6lld   %.1f tokens/s (median of %d), %.1f GFLOP/s = %.1f%% of the measured %s %s peak %.1f\n",
      static_cast<long long>(o.pp), pp_tok_s, o.repeat, pp_gflops, 100 * pp_gflops / peak, f32_fma_peak_isa(),
      peak_kind, peak);
  if (int8_products)
    std::printf(
        "           %.1f%% of the measured %s int8 multiply-add peak %.1f GOP/s (quantized matrices)\n",
        100 * pp_gflops / peak_int8, int8_dot_peak_isa(), peak_int8);
  std::printf(
      "tg%-6lld   %.2f tokens/s (median of %d), %.1f GB/s of weights = %.1f%% of the measured %.1f GB/s "
      "memory read bandwidth\n",
      static_cast<long long>(o.tg), tg_tok_s, o.repeat, tg_gbs, 100 * tg_gbs / bandwidth, bandwidth);
  std::printf("           inside matmul kernels %.1f GB/s = %.1f%% of it; a token's time:", tg_matmul_gbs,
              100 * tg_matmul_gbs / bandwidth);
  for (const auto& [name, fraction] : tg_breakdown.items())
    std::printf(" %s %.1f%%", name.c_str(), 100 * fraction.get<double>());
  std::printf("\n           matmuls by role (MB a token, GB/s, %% of bandwidth):");
  for (int r = 0; r < static_cast<int>(Transformer::MatmulRole::kCount); ++r) {
    const char* name = Transformer::matmul_role_name(static_cast<Transformer::MatmulRole>(r));
    if (!by_role.contains(name)) continue;
    const nlohmann::json& role = by_role[name];
    std::printf(" %s %.1f MB %.1f GB/s %.0f%%;", name, role["mb_per_token"].get<double>(),
                role["gb_per_s"].get<double>(), 100 * role["fraction_of_bandwidth"].get<double>());
  }
  std::printf("\n");
}

void run_bench(const BenchOptions& o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  if (o.model.empty() == o.shape.empty()) fail("give either -m DIR or --shape NAME");
  if (o.tokens <= 0 || o.batch <= 0 || o.repeat <= 0) fail("--tokens, --batch and --repeat must be > 0");
  if (o.logits_from < 0 || o.logits_from >= o.tokens) fail("--logits-from must be in [0, --tokens)");
  const Precision requested = parse_dtype(o.dtype);
  if (!o.shape.empty() && find_shape(o.shape).family == "diffusion_gemma")
    return run_canvas_bench(canvas_options(o), *random_canvas_model(o, requested));
  std::shared_ptr<Model> model;
  std::optional<ColdStart> cold;
  if (!o.model.empty()) {
    if (o.first_tokens <= 0) fail("--first-tokens must be > 0");
    const auto t0 = std::chrono::steady_clock::now();
    model = load_model_or_throw(o.model, requested, o.threads, o.json);
    if (model->canvas_decoder()) return run_canvas_bench(canvas_options(o), *model);
    const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cold = measure_cold_start(*model, load_seconds, o.first_tokens);
    if (!o.json)
      std::printf(
          "cold start loaded in %.2f s, first forward (%lld-position canvas) %.2f s: load to first token "
          "%.2f s; weights in their final layout after %.2f s (--prepare %s)\n",
          cold->load_seconds, static_cast<long long>(cold->first_tokens), cold->first_forward_seconds,
          cold->load_seconds + cold->first_forward_seconds, cold->prepared_after_seconds,
          prepare_flag().c_str());
  } else {
    if (!o.json) std::fprintf(stderr, "dllm: building random model '%s'...\n", o.shape.c_str());
    model = make_random_model(find_shape(o.shape), o.layers, requested, 1234,
                              parse_random_weights(weights_flag()), parse_experts(experts_flag()),
                              parse_backend(backend_flag()));
    use_backend_flags(*model, o.json);
  }
  const ModelInfo& mi = model->info();
  auto* transformer = dynamic_cast<Transformer*>(model.get());
  if (!transformer) fail("dllm bench: the model is not a Transformer");
  if (o.ar) return run_ar_bench(o, *model, *transformer);
  if (o.context < 0) fail("--context must be >= 0");
  if (o.context > 0 && o.batch != 1) fail("--context (the block cache) runs one row: use --batch 1");
  const std::string load = loadavg();
  const double load1 = load.empty() ? 0.0 : std::stod(load);
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  const bool passive =
      wait_policy && (std::string(wait_policy) == "PASSIVE" || std::string(wait_policy) == "passive");
  if (!o.json && load1 >= 0.5)
    std::fprintf(
        stderr,
        "dllm: warning: load average %s before the run: while other work shares the cores, these numbers are "
        "low and noisy%s\n",
        load.c_str(), passive ? "" : " (OMP_WAIT_POLICY=PASSIVE stops OpenMP threads spinning against it)");
  // The VM's clock and share of the host vary from second to second: measure the peak before and after the
  // timed forwards and use the higher reading, so that a slow moment does not inflate the fractions.
  double peak_f32 = measure_f32_fma_peak_gflops(0.5);

  std::vector<int32_t> tokens(static_cast<size_t>(o.batch * o.tokens));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((i * 7919 + 13) % mi.vocab_size);
  ForwardInput in;
  in.tokens = tokens;
  in.batch = o.batch;
  in.logits_from = o.logits_from;
  // --context: a block step of the exact block cache: `context` positions computed once (kExtend, appended),
  // then each timed forward runs only the block against them (kExtend without appending).
  KvCache cache;
  std::vector<int32_t> context_tokens(static_cast<size_t>(o.context));
  for (size_t i = 0; i < context_tokens.size(); ++i)
    context_tokens[i] = static_cast<int32_t>((i * 104729 + 7) % mi.vocab_size);
  if (o.context > 0) {
    ForwardInput prefill;
    prefill.tokens = context_tokens;
    prefill.cache = &cache;
    prefill.cache_op = CacheOp::kExtend;
    prefill.cache_append = o.context;
    prefill.logits_from = o.context - 1;
    if (!o.json)
      std::fprintf(stderr, "dllm: prefilling %lld cached positions...\n", static_cast<long long>(o.context));
    model->forward(prefill).value();
    in.cache = &cache;
    in.cache_op = CacheOp::kExtend;
    in.cache_append = 0;
  }
  model->forward(in).value();  // warm-up: primitive creation, page faults
  transformer->reset_moe_stats();

  std::vector<double> times, expert_times;  // per forward: the whole forward, its routed experts
  const Backend::Traffic traffic_before = transformer->backend().traffic();
  KernelProfile::reset();
  KernelProfile::enabled = true;
  for (int r = 0; r < o.repeat; ++r) {
    const double experts_before = transformer->moe_stats().expert_seconds;
    const auto t0 = std::chrono::steady_clock::now();
    model->forward(in).value();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    expert_times.push_back(transformer->moe_stats().expert_seconds - experts_before);
  }
  KernelProfile::enabled = false;
  const Backend::Traffic traffic_after = transformer->backend().traffic();
  const double per_forward = 1.0 / std::max(1, o.repeat);
  const nlohmann::json device = {
      {"backend", transformer->backend().describe()},
      {"uploaded_mb_per_forward", (traffic_after.uploaded - traffic_before.uploaded) * per_forward / 1e6},
      {"downloaded_mb_per_forward",
       (traffic_after.downloaded - traffic_before.downloaded) * per_forward / 1e6},
      {"submits_per_forward",
       static_cast<double>(traffic_after.submits - traffic_before.submits) * per_forward}};
  peak_f32 = std::max(peak_f32, measure_f32_fma_peak_gflops(0.5));
  const bool bf16_math = mi.precision == Precision::kBF16 && bf16_matmul_supported();
  const auto [peak, peak_kind] = float_product_peak(mi.precision, peak_f32);
  const double t = median(times);
  const FlopCount flops = count_flops(transformer->config(), o.batch, o.tokens, o.logits_from, o.context);
  const double gflops = flops.total() / t / 1e9;
  const double tok_s = static_cast<double>(o.batch * o.tokens) / t;
  const double total_measured = std::accumulate(times.begin(), times.end(), 0.0);

  nlohmann::json breakdown = nlohmann::json::object();
  double kernel_sum = 0;
  for (int k = 0; k < static_cast<int>(KernelKind::kCount); ++k) {
    kernel_sum += KernelProfile::seconds[k];
    breakdown[KernelProfile::name(static_cast<KernelKind>(k))] = KernelProfile::seconds[k] / total_measured;
  }
  breakdown["rest (embedding, glue)"] = std::max(0.0, 1.0 - kernel_sum / total_measured);
  const double matmul_gflops = (flops.linear + flops.head) / (KernelProfile::seconds[0] / o.repeat) / 1e9;

  // How the matrices are held and who multiplies them: GGUF weights may run in 8 bits (all or some matrices).
  const int64_t q8 = transformer->q8_matrices();
  const int64_t matrices = transformer->matrices();

  // Mixture of experts: the routed experts' share, the bytes of expert weights they read and that rate
  // against this machine's measured memory bandwidth (a block of 32 tokens touches most experts once:
  // weight-bound).
  const Transformer::MoeStats& moe = transformer->moe_stats();
  nlohmann::json experts = nullptr;
  double bandwidth = 0;
  if (moe.experts_run > 0) {
    bandwidth = measure_memory_read_gbs(0.5);
    // Every forward routes the same tokens, so reads the same experts: rates from the median forward's time.
    const double per_forward = median(expert_times), gb = moe.expert_bytes / o.repeat / 1e9;
    experts = {{"experts_run_per_forward", static_cast<double>(moe.experts_run) / o.repeat},
               {"expert_gb_per_forward", gb},
               {"expert_seconds_per_forward", per_forward},
               {"expert_time_fraction", moe.expert_seconds / total_measured},
               {"expert_gb_per_s", gb / per_forward},
               {"expert_gflops", moe.expert_flops / o.repeat / per_forward / 1e9},
               {"memory_read_gb_per_s_measured", bandwidth},
               {"expert_fraction_of_bandwidth", gb / per_forward / bandwidth}};
  }
  std::string weights = dtype_label(mi.precision);
  std::string backend = bf16_math ? "oneDNN" : matmul_backend_name(f32_matmul_backend());
  if (const int64_t packed = transformer->packed_matrices(); packed > 0) {
    weights += " + GGUF " + transformer->ggml_type_name() + " blocks packed in 16-row panels (" +
               std::to_string(packed) + " of " + std::to_string(matrices) + " matrices)";
    backend += std::string(" + LinearPacked (") +
               quant::LinearPacked::kernel_name(quant::LinearPacked::best_kernel()) + ")";
  }
  if (const int64_t ggml = transformer->ggml_matrices(); ggml > 0) {
    weights += " + GGUF " + transformer->ggml_type_name() + " blocks in place (" + std::to_string(ggml) +
               " of " + std::to_string(matrices) + " matrices)";
    backend += std::string(" + LinearGgml (") +
               quant::LinearGgml::kernel_name(quant::LinearGgml::best_kernel()) + ")";
  }
  std::string products = bf16_math ? "bf16" : "f32";
  if (transformer->packed_matrices() + transformer->ggml_matrices() == matrices) products = "int8";
  if (q8 > 0 && q8 == matrices) {
    weights = "8-bit Q8_0";
    backend = "LinearQ8 (AVX2 int8)";
    products = "int8";
  } else if (q8 > 0) {
    weights += " + 8-bit Q8_0 (" + std::to_string(q8) + " of " + std::to_string(matrices) + " matrices)";
    backend += " + LinearQ8 (AVX2 int8)";
  }

  // Quantized matrices multiply int8 x int8: their GOP/s against the measured int8 multiply-add peak.
  const bool int8_products = transformer->packed_matrices() + transformer->ggml_matrices() + q8 > 0;
  const double peak_int8 = int8_products ? measure_int8_dot_peak_gops(0.5) : 0;
  if (o.json) {
    nlohmann::json out = {
        {"model", mi.path},
        {"compute", dtype_label(mi.precision)},
        {"precision", mi.precision_by_type},
        {"weights", weights},
        {"q8_matrices", q8},
        {"products", products},
        {"matmul_backend", backend},
        {"threads", omp_get_max_threads()},
        {"load_average_before", load},
        {"layers", mi.n_layers},
        {"batch", o.batch},
        {"tokens", o.tokens},
        {"logits_from", o.logits_from},
        {"context", o.context},
        {"experts", experts},
        {"seconds_median", t},
        {"seconds_all", times},
        {"tokens_per_second", tok_s},
        {"gflops", gflops},
        {"gflop_per_forward", flops.total() / 1e9},
        {"peak_gflops", peak},
        {"peak_kind", peak_kind},
        {"peak_f32_fma_gflops_measured", peak_f32},
        {"peak_f32_fma_isa", f32_fma_peak_isa()},
        {"fraction_of_peak", gflops / peak},
        {"matmul_gflops", matmul_gflops},
        {"peak_int8_gops_measured", int8_products ? nlohmann::json(peak_int8) : nullptr},
        {"peak_int8_isa", int8_dot_peak_isa()},
        {"matmul_fraction_of_int8_peak", int8_products ? nlohmann::json(matmul_gflops / peak_int8) : nullptr},
        {"time_fraction", breakdown},
        {"device", device},
        {"cold_start", cold ? cold->to_json() : nlohmann::json(nullptr)}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("model      %s (%s, %lld layers, d=%lld, ffn=%lld, vocab %lld)\n", mi.path.c_str(),
              mi.architecture.c_str(), static_cast<long long>(mi.n_layers),
              static_cast<long long>(mi.d_model), static_cast<long long>(mi.ffn_hidden),
              static_cast<long long>(mi.vocab_size));
  std::printf("forward    batch %lld x %lld tokens, logits for %lld positions, compute %s, %d threads\n",
              static_cast<long long>(o.batch), static_cast<long long>(o.tokens),
              static_cast<long long>(o.tokens - o.logits_from), dtype_label(mi.precision).c_str(),
              omp_get_max_threads());
  std::printf("matmul     %s weights, %s products, on %s\n", weights.c_str(), products.c_str(),
              backend.c_str());
  std::printf("time       %.4f s median of %d (min %.4f, max %.4f)\n", t, o.repeat,
              *std::min_element(times.begin(), times.end()), *std::max_element(times.begin(), times.end()));
  std::printf("speed      %.1f tokens/s, %.1f GFLOP/s (%.2f GFLOP per forward)\n", tok_s, gflops,
              flops.total() / 1e9);
  std::printf("peak       %.1f GFLOP/s %s (measured %s f32 FMA peak %.1f) -> %.1f%% of peak end to end\n",
              peak, peak_kind, f32_fma_peak_isa(), peak_f32, 100 * gflops / peak);
  std::printf("matmuls    %.1f GFLOP/s inside the matmul kernels (%.1f%% of peak)\n", matmul_gflops,
              100 * matmul_gflops / peak);
  if (int8_products)
    std::printf(
        "int8       %.1f%% of the measured %s int8 multiply-add peak %.1f GOP/s (quantized matrices)\n",
        100 * matmul_gflops / peak_int8, int8_dot_peak_isa(), peak_int8);
  if (o.context > 0)
    std::printf("cache      each forward ran %lld tokens against %lld cached positions\n",
                static_cast<long long>(o.tokens), static_cast<long long>(o.context));
  if (!experts.is_null())
    std::printf(
        "experts    %.0f expert matmul groups per forward, %.3f GB of expert weights read in %.4f s: %.1f "
        "GB/s = "
        "%.1f%% of the measured %.1f GB/s memory read bandwidth; %.1f GFLOP/s on them; %.1f%% of the time\n",
        experts["experts_run_per_forward"].get<double>(), experts["expert_gb_per_forward"].get<double>(),
        experts["expert_seconds_per_forward"].get<double>(), experts["expert_gb_per_s"].get<double>(),
        100 * experts["expert_fraction_of_bandwidth"].get<double>(), bandwidth,
        experts["expert_gflops"].get<double>(), 100 * experts["expert_time_fraction"].get<double>());
  if (transformer->backend().kind() != BackendKind::kCpu)
    std::printf(
        "device     %s; per forward %.2f MB uploaded, %.2f MB downloaded, %.0f command buffers (the "
        "breakdown below is the host's: the device's work shows as rest)\n",
        device["backend"].get<std::string>().c_str(), device["uploaded_mb_per_forward"].get<double>(),
        device["downloaded_mb_per_forward"].get<double>(), device["submits_per_forward"].get<double>());
  std::printf("breakdown ");
  for (auto it = breakdown.begin(); it != breakdown.end(); ++it)
    std::printf(" %s %.1f%%", it.key().c_str(), 100 * it.value().get<double>());
  std::printf("\n");
}

void setup(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd =
      app.add_subcommand("bench", "Time forward passes: tokens/s, GFLOP/s and % of this machine's peak");
  cmd->add_option("-m,--model", o->model, "Model directory");
  cmd->add_option(
      "--shape", o->shape,
      "Random model of a named shape (its real config.json, random weights; --weights q8 | q8_0 | "
      "q4_0 | q4_k | q6_k holds the matrices in LinearQ8 / GGUF Q8_0 / Q4_0 / Q4_K / Q6_K blocks) instead of "
      "-m: " +
          shape_names());
  cmd->add_option("--layers", o->layers, "With --shape: number of layers (0 = the shape's own)")
      ->capture_default_str();
  cmd->add_option("--tokens", o->tokens, "Sequence length of each forward")->capture_default_str();
  cmd->add_option("--batch", o->batch, "Rows per forward")->capture_default_str();
  cmd->add_option("--logits-from", o->logits_from,
                  "Compute logits only from this position on (generation skips the prompt)")
      ->capture_default_str();
  cmd->add_option(
         "--context", o->context,
         "Time a block step of the exact block cache: this many positions cached first, then each "
         "forward runs the --tokens block against them (block-diffusion models; one row); canvas models "
         "(DiffusionGemma): the prompt tokens in the encoder's cache (0 = 512)")
      ->capture_default_str();
  cmd->add_option("--repeat", o->repeat, "Timed forwards (the median is reported)")->capture_default_str();
  cmd->add_option("--first-tokens", o->first_tokens,
                  "With -m: the cold start's first forward runs a canvas of this many positions (a quarter "
                  "prompt, the rest masks, as a short request's first denoising step); reported as load to "
                  "first token before the timed forwards")
      ->capture_default_str();
  cmd->add_flag(
      "--ar", o->ar,
      "Autoregressive models, as llama-bench: prompt processing (--pp tokens in one forward) and token "
      "generation (--tg tokens, one forward each), with % of peak and of memory bandwidth");
  cmd->add_option("--pp", o->pp, "With --ar: prompt tokens")->capture_default_str();
  cmd->add_option("--tg", o->tg, "With --ar: generated tokens")->capture_default_str();
  cmd->add_flag("--generate", o->generate,
                "Canvas models (DiffusionGemma): also run generate() at the released sampler settings on a "
                "--context-token prompt, one canvas, and report its tokens/s");
  cmd->add_option("--random-file", o->random_file,
                  "Canvas-model shapes (diffusion-gemma-*): the random GGUF file to write once and reuse "
                  "(default: in the temporary directory)");
  add_weights_option(cmd);
  cmd->add_option("--dtype", o->dtype, kDtypeHelp)->capture_default_str();
  add_backend_options(cmd);
  cmd->add_option("-t,--threads", o->threads, "Threads (0 = all cores)")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print the results as one JSON object");
  cmd->callback([o] { run_bench(*o); });
}

RegisterCommand registration("bench", setup);

}  // namespace
}  // namespace dllm::cli
