// `dllm bench` for a uniform-state canvas model (DiffusionGemma): the encoder over a prompt of --context
// tokens, then timed decoder steps over one canvas (self-conditioned, as every step after a canvas's first
// is), with GFLOP/s against the measured float peak, the routed experts' GB/s against the measured memory
// bandwidth, a breakdown, and optionally (--generate) a real generate() at the released sampler settings.
#include "bench_canvas.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>

#include "common.h"
#include "core/error.h"
#include "kernels/peak.h"
#include "model/diffusion_gemma.h"
#include "model/precision.h"

namespace dllm::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Multiply-adds x 2 of one decoder step over `rows` canvas positions after `context` encoded positions.
double decoder_flops(const DiffusionGemmaConfig& c, int64_t rows, int64_t context, bool self_conditioned) {
  const ModelInfo& m = c.info;
  const double d = static_cast<double>(m.d_model), r = static_cast<double>(rows);
  double f = 0;
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const bool sliding = c.layer_sliding[static_cast<size_t>(l)];
    const auto& a = sliding ? c.sliding : c.full;
    const double q = static_cast<double>(m.n_heads * a.head_dim),
                 kv = static_cast<double>(a.kv_heads * a.head_dim);
    f += 2 * r * d * (2 * q + kv * (sliding ? 2 : 1));  // q, o; k (and v)
    const int64_t cached = sliding ? std::min(context, c.sliding_window - 1) : context;
    f += 4 * r * static_cast<double>(cached + rows) * q;                        // scores and the weighted sum
    f += 2 * r * 3 * static_cast<double>(m.ffn_hidden) * d;                     // dense MLP
    f += 2 * r * static_cast<double>(m.n_experts) * d;                          // router
    f += 2 * r * static_cast<double>(m.n_experts_used * 3 * c.expert_ffn) * d;  // routed experts
  }
  f += 2 * r * static_cast<double>(m.vocab_size) * d;  // head
  if (self_conditioned)
    f += 2 * r * static_cast<double>(m.vocab_size) * d + 2 * r * 3 * static_cast<double>(m.ffn_hidden) * d;
  return f;
}

}  // namespace

void run_canvas_bench(const CanvasBenchOptions& o, Model& model) {
  auto* dg = dynamic_cast<DiffusionGemma*>(&model);
  CanvasDecoder* dec = model.canvas_decoder();
  if (!dg || !dec) fail("dllm bench: not a canvas model");
  if (o.context <= 0 || o.repeat <= 0) fail("--context and --repeat must be > 0 for a canvas model");
  const ModelInfo& mi = model.info();
  const DiffusionGemmaConfig& c = dg->config();
  const int64_t L = dec->canvas_length(), V = mi.vocab_size;

  const std::string load = loadavg();
  double peak_f32 = measure_f32_fma_peak_gflops(0.5);
  std::vector<int32_t> prompt(static_cast<size_t>(o.context)), canvas(static_cast<size_t>(L));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7919 + 13) % V);
  for (size_t i = 0; i < canvas.size(); ++i) canvas[i] = static_cast<int32_t>((i * 104729 + 7) % V);

  if (!o.json)
    std::fprintf(stderr, "dllm: encoding a %lld-token prompt...\n", static_cast<long long>(o.context));
  auto cache = dec->new_cache(1);
  auto t0 = std::chrono::steady_clock::now();
  dec->encode(*cache, prompt).value();
  const double encode_seconds = seconds_since(t0);
  // The first step of a canvas has no self-conditioning; the timed ones have (as every later step).
  std::vector<float> sc = dec->decode(*cache, canvas, {}).value();
  dg->reset_profile();
  dg->set_profiling(true);
  std::vector<double> times;
  for (int r = 0; r < o.repeat; ++r) {
    if (!o.json) std::fprintf(stderr, "\rdllm: step %d / %d", r + 1, o.repeat);
    t0 = std::chrono::steady_clock::now();
    std::vector<float> logits = dec->decode(*cache, canvas, sc).value();
    times.push_back(seconds_since(t0));
    sc.swap(logits);
  }
  dg->set_profiling(false);
  if (!o.json) std::fprintf(stderr, "\r\033[K");
  peak_f32 = std::max(peak_f32, measure_f32_fma_peak_gflops(0.5));
  const double bandwidth = measure_memory_read_gbs(0.5);
  const double step = median(times), total = std::accumulate(times.begin(), times.end(), 0.0);
  const double flops = decoder_flops(c, L, o.context, true);
  const DiffusionGemma::Profile& p = dg->profile();
  const double per = 1.0 / o.repeat;
  const double expert_gb = p.expert_bytes * per / 1e9, expert_s = p.expert_seconds * per;

  nlohmann::json generate_run = nullptr;
  if (o.generate) {
    if (!o.json) std::fprintf(stderr, "dllm: generate() at the released settings...\n");
    GenerateParams params;
    params.seed = 1;
    params.uniform_state.max_new_tokens = L;
    const GenerateResult r = generate(model, {prompt}, params).value();
    int64_t tokens = 0;
    const int32_t pad = *dec->generation_defaults().pad_id;
    for (int32_t t : r.outputs.at(0)) tokens += t != pad;
    generate_run = {{"canvases", r.canvases_run},
                    {"decoder_calls", r.forwards},
                    {"seconds", r.seconds},
                    {"tokens", tokens},
                    {"tokens_per_second", r.seconds > 0 ? tokens / r.seconds : 0.0}};
  }

  const nlohmann::json out = {
      {"model", mi.path},
      {"precision", mi.precision_by_type},
      {"threads", omp_get_max_threads()},
      {"load_average_before", load},
      {"layers", mi.n_layers},
      {"canvas", L},
      {"context", o.context},
      {"weight_gb", static_cast<double>(dg->weight_bytes()) / 1e9},
      {"encode_seconds", encode_seconds},
      {"encode_tokens_per_second", static_cast<double>(o.context) / encode_seconds},
      {"step_seconds", step},
      {"step_seconds_all", times},
      {"canvas_positions_per_second", static_cast<double>(L) / step},
      {"released_sampler_tokens_per_second_at_48_steps", static_cast<double>(L) / (48 * step)},
      {"gflop_per_step", flops / 1e9},
      {"gflops", flops / step / 1e9},
      {"f32_peak_gflops_measured", peak_f32},
      {"fraction_of_f32_peak", flops / step / 1e9 / peak_f32},
      {"experts",
       {{"experts_run_per_step", static_cast<double>(p.experts_run) * per},
        {"expert_gb_per_step", expert_gb},
        {"expert_seconds_per_step", expert_s},
        {"expert_gb_per_s", expert_s > 0 ? expert_gb / expert_s : 0.0},
        {"expert_gflops", expert_s > 0 ? p.expert_flops * per / expert_s / 1e9 : 0.0},
        {"memory_read_gb_per_s_measured", bandwidth},
        {"expert_fraction_of_bandwidth", expert_s > 0 ? expert_gb / expert_s / bandwidth : 0.0}}},
      {"breakdown",
       {{"experts", p.expert_seconds / total},
        {"attention", p.attention_seconds / total},
        {"self_conditioning", p.self_conditioning_seconds / total},
        {"head", p.head_seconds / total},
        {"rest", std::max(0.0, 1 - (p.expert_seconds + p.attention_seconds + p.self_conditioning_seconds +
                                    p.head_seconds) /
                                       total)}}},
      {"generate", generate_run}};
  if (o.json) {
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("model      %s: %lld layers, %.2f GB of weights as held (%s), %d threads, load average %s\n",
              mi.path.c_str(), static_cast<long long>(mi.n_layers), out["weight_gb"].get<double>(),
              precision_by_type_line(mi.precision_by_type).c_str(), omp_get_max_threads(), load.c_str());
  std::printf("encoder    %lld-token prompt in %.3f s: %.1f tokens/s\n", static_cast<long long>(o.context),
              encode_seconds, out["encode_tokens_per_second"].get<double>());
  std::printf(
      "step       %lld-position canvas, self-conditioned: median %.3f s of %d (%.1f positions/s); %.1f GFLOP "
      "a step, %.1f GFLOP/s = %.1f%% of the measured f32 FMA peak %.1f GFLOP/s\n",
      static_cast<long long>(L), step, o.repeat, static_cast<double>(L) / step, flops / 1e9,
      flops / step / 1e9, 100 * flops / step / 1e9 / peak_f32, peak_f32);
  std::printf(
      "experts    %.0f expert products a step, %.3f GB of expert weights in %.3f s: %.1f GB/s = %.1f%% of "
      "the "
      "measured %.1f GB/s memory read bandwidth; %.1f GFLOP/s on them\n",
      static_cast<double>(p.experts_run) * per, expert_gb, expert_s,
      out["experts"]["expert_gb_per_s"].get<double>(),
      100 * out["experts"]["expert_fraction_of_bandwidth"].get<double>(), bandwidth,
      out["experts"]["expert_gflops"].get<double>());
  std::printf("breakdown ");
  for (auto it = out["breakdown"].begin(); it != out["breakdown"].end(); ++it)
    std::printf(" %s %.1f%%", it.key().c_str(), 100 * it.value().get<double>());
  std::printf("\nsampler    at the released 48 steps a canvas (no early stop): %.2f tokens/s\n",
              out["released_sampler_tokens_per_second_at_48_steps"].get<double>());
  if (!generate_run.is_null())
    std::printf(
        "generate   released settings, one %lld-token canvas: %lld decoder calls, %.2f s, %.2f tokens/s\n",
        static_cast<long long>(L), static_cast<long long>(generate_run["decoder_calls"].get<int64_t>()),
        generate_run["seconds"].get<double>(), generate_run["tokens_per_second"].get<double>());
}

}  // namespace dllm::cli
