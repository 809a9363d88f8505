// `dllm study`: the held-out evaluation of a model trained on files listed in a held-out list (models/demo):
//   loss   - masked-token cross-entropy and argmax accuracy over consecutive windows at fixed mask ratios
//   (the
//            model card's table, computed by the engine);
//   metric - infilling accuracy: random spans inside windows and whole suffixes filled with the exact
//   schedule; grid   - the scheduler study: one infill task under steps / threshold / block length / cache
//   settings, with
//            accuracy, forwards per token and tokens/s, and the fastest setting within X points of the exact
//            per-token schedule.
// Writes a JSON of everything (--out-json) and a markdown report (--out-md); tools/study/plot_study.py draws
// the plot. docs/denoising.md "Infilling"; results in bench/results/scheduler_study.md.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "command.h"
#include "common.h"
#include "core/error.h"
#include "core/file.h"
#include "denoise/strategy_names.h"
#include "model/model_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace dllm::cli {
namespace {

struct StudyOptions {
  std::string model = default_model_path();
  std::string heldout_list = "tools/train/heldout_files.txt";
  std::string heldout_root = "/usr/lib/python3.11";
  std::string parts = "loss,metric,grid";
  int64_t window = 256;
  std::string loss_ratios = "0.15,0.3,0.5,0.7,0.85";
  int64_t metric_windows = 64;
  std::string metric_spans = "8,16,32";
  std::string metric_suffixes = "32,64";
  int64_t windows = 32;  // grid
  int64_t span = 32;
  std::string block_lengths = "32,8";
  std::string thresholds = "0.5,0.7,0.8,0.9,0.95,0.99";
  std::string caches = "none,prefix,dual";
  std::vector<double> within = {1, 3};
  uint64_t seed = 0;
  std::string dtype = "f32";
  int threads = 1;
  std::string out_json, out_md;
  bool quiet = false;
};

// splitmix64: the study's only random source (portable, unlike <random>'s distributions).
struct Mix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
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

// The held-out stream as in tools/train/train.py: every listed file encoded without special tokens, then EOS.
std::vector<int32_t> heldout_stream(const StudyOptions& o, const Tokenizer& tok, int32_t eos,
                                    int64_t* files) {
  std::ifstream list(o.heldout_list);
  if (!list) fail(o.heldout_list, ": cannot open");
  std::vector<int32_t> stream;
  std::string line;
  *files = 0;
  while (std::getline(list, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto ids = tok.encode(
        read_whole_file(o.heldout_root + "/" + line, " (the held-out files are read from --heldout-root)"),
        /*add_special_tokens=*/false);
    stream.insert(stream.end(), ids.begin(), ids.end());
    stream.push_back(eos);
    ++*files;
  }
  return stream;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
// Mean and the half-width of a normal 95% interval of the mean over independent units (windows).
std::pair<double, double> mean_ci(const std::vector<double>& v) {
  const double n = static_cast<double>(v.size());
  if (n == 0) return {0, 0};
  const double m = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  const double sd = n > 1 ? std::sqrt(ss / (n - 1)) : 0;
  return {m, 1.96 * sd / std::sqrt(n)};
}

std::string fmt(const char* f, double a) {
  char b[64];
  std::snprintf(b, sizeof b, f, a);
  return b;
}

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

// ---- loss: masked-token CE / accuracy over all consecutive windows at fixed ratios ----
nlohmann::json run_loss(Model& model, const std::vector<int32_t>& stream, const StudyOptions& o) {
  const ModelInfo& mi = model.info();
  const int64_t L = o.window, n = static_cast<int64_t>(stream.size()) / L, V = mi.vocab_size;
  nlohmann::json out = nlohmann::json::object();
  for (double ratio : parse_list<double>(o.loss_ratios, "--loss-ratios")) {
    Mix rng{o.seed ^ 0x10550000ull ^ static_cast<uint64_t>(std::llround(ratio * 1000))};
    double ce = 0;
    int64_t correct = 0, count = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t w = 0; w < n; ++w) {
      std::vector<int32_t> x(stream.begin() + w * L, stream.begin() + (w + 1) * L);
      std::vector<uint8_t> masked(L);
      for (int64_t i = 0; i < L; ++i)
        if ((masked[i] = rng.uniform() < ratio)) x[i] = mi.mask_id;
      ForwardInput in;
      in.tokens = x;
      const std::vector<float> logits = model.forward(in).value();
      for (int64_t i = 0; i < L; ++i) {
        if (!masked[i]) continue;
        const float* row = logits.data() + i * V;
        const int32_t target = stream[w * L + i];
        const int64_t best = std::max_element(row, row + V) - row;
        double z = 0;
        for (int64_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(row[v]) - row[best]);
        ce += std::log(z) - (static_cast<double>(row[target]) - row[best]);
        correct += best == target;
        ++count;
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out[fmt("%g", ratio)] = {{"masked_token_ce", ce / static_cast<double>(count)},
                             {"masked_token_acc", static_cast<double>(correct) / static_cast<double>(count)},
                             {"masked_tokens", count},
                             {"sequences", n},
                             {"seconds", secs}};
    if (!o.quiet)
      std::fprintf(stderr,
                   "loss: ratio %g: CE %.4f, acc %.4f over %lld masked tokens of %lld windows (%.1f s)\n",
                   ratio, ce / count, static_cast<double>(correct) / count, static_cast<long long>(count),
                   static_cast<long long>(n), secs);
  }
  return out;
}

// A held-out window with a span to fill.
struct Task {
  std::vector<int32_t> truth;  // the window
  int64_t begin = 0, length = 0;
};

std::vector<int64_t> window_order(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  Mix rng{seed ^ 0x5eed0000ull};
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  return order;
}

// A span of `length` at a random place with at least 16 tokens (or a quarter of the rest) on each side.
Task span_task(const std::vector<int32_t>& stream, int64_t window_index, int64_t L, int64_t length,
               uint64_t seed) {
  Task t;
  t.truth.assign(stream.begin() + window_index * L, stream.begin() + (window_index + 1) * L);
  t.length = length;
  const int64_t margin = std::min<int64_t>(16, (L - length) / 4);
  Mix rng{seed ^ (static_cast<uint64_t>(window_index) << 20) ^ static_cast<uint64_t>(length)};
  t.begin = margin + rng.below(L - length - 2 * margin + 1);
  return t;
}

Task suffix_task(const std::vector<int32_t>& stream, int64_t window_index, int64_t L, int64_t length) {
  Task t;
  t.truth.assign(stream.begin() + window_index * L, stream.begin() + (window_index + 1) * L);
  t.length = length;
  t.begin = L - length;
  return t;
}

struct Outcome {
  int64_t correct = 0, forwards = 0, forward_tokens = 0;
  double seconds = 0;
};

Outcome fill(Model& model, const Task& t, const GenerateParams& p) {
  std::vector<int32_t> canvas = t.truth;
  std::fill(canvas.begin() + t.begin, canvas.begin() + t.begin + t.length, model.info().mask_id);
  const auto r = infill(model, {canvas}, p).value();
  Outcome o;
  for (int64_t i = t.begin; i < t.begin + t.length; ++i) o.correct += r.outputs[0][i] == t.truth[i];
  for (int64_t i = 0; i < static_cast<int64_t>(canvas.size()); ++i)
    if (i < t.begin || i >= t.begin + t.length)
      if (r.outputs[0][i] != t.truth[i]) fail("study: infill changed an unmasked position ", i);
  o.forwards = r.forwards;
  o.forward_tokens = r.forward_tokens;
  o.seconds = r.seconds;
  return o;
}

GenerateParams exact_params(int64_t length) {
  GenerateParams p;
  p.gen_length = length;
  p.block_length = length;
  p.steps = length;
  p.unmask = Unmask::kConfidence;
  p.transfer = Transfer::kUniform;
  return p;
}

// ---- metric: infill accuracy of spans and suffixes with the exact schedule (and one-step parallel decoding)
// ----
nlohmann::json run_metric(Model& model, const std::vector<int32_t>& stream, const StudyOptions& o) {
  const int64_t L = o.window, n = static_cast<int64_t>(stream.size()) / L;
  const int64_t W = std::min(o.metric_windows, n);
  const auto order = window_order(n, o.seed);
  nlohmann::json out = nlohmann::json::array();
  struct Kind {
    std::string name;
    int64_t length;
    bool suffix;
  };
  std::vector<Kind> kinds;
  for (int64_t s : parse_list<int64_t>(o.metric_spans, "--metric-spans"))
    kinds.push_back({"span " + std::to_string(s), s, false});
  for (int64_t s : parse_list<int64_t>(o.metric_suffixes, "--metric-suffixes"))
    kinds.push_back({"suffix " + std::to_string(s), s, true});
  for (const auto& k : kinds) {
    if (k.length <= 0 || k.length >= L) fail("study: span length ", k.length, " must be in [1, ", L, ")");
    for (int one_step = 0; one_step < 2; ++one_step) {
      GenerateParams p = exact_params(k.length);
      if (one_step) p.steps = 1;
      std::vector<double> acc;
      int64_t correct = 0, forwards = 0;
      double secs = 0;
      for (int64_t w = 0; w < W; ++w) {
        const Task t = k.suffix ? suffix_task(stream, order[w], L, k.length)
                                : span_task(stream, order[w], L, k.length, o.seed);
        const Outcome r = fill(model, t, p);
        acc.push_back(static_cast<double>(r.correct) / static_cast<double>(k.length));
        correct += r.correct;
        forwards += r.forwards;
        secs += r.seconds;
      }
      const auto [m, ci] = mean_ci(acc);
      const std::string schedule = one_step ? "1 step (all at once)" : "exact (1 token/step)";
      out.push_back({{"task", k.name},
                     {"schedule", schedule},
                     {"windows", W},
                     {"tokens", W * k.length},
                     {"accuracy", m},
                     {"ci95", ci},
                     {"forwards", forwards},
                     {"seconds", secs}});
      if (!o.quiet)
        std::fprintf(stderr, "metric: %-10s %-22s acc %.4f +- %.4f (%lld windows, %.1f s)\n", k.name.c_str(),
                     schedule.c_str(), m, ci, static_cast<long long>(W), secs);
    }
  }
  return out;
}

// ---- grid: the scheduler study ----
struct GridSetting {
  std::string schedule;  // "steps N" | "threshold T"
  int64_t block = 0;
  std::string cache;
  GenerateParams params;
  bool exact = false;
};

std::vector<GridSetting> grid_settings(const StudyOptions& o) {
  const int64_t S = o.span;
  std::vector<GridSetting> out;
  const auto blocks = parse_list<int64_t>(o.block_lengths, "--block-lengths");
  const auto caches = parse_list<std::string>(o.caches, "--caches");
  for (int64_t block : blocks) {
    if (block <= 0 || S % block != 0) fail("--block-lengths: ", block, " does not divide --span ", S);
    for (const auto& cache : caches) {
      const CacheMode cm = cache_axis().parse(cache, "--caches");
      for (int64_t div : {1, 2, 4, 8, 16}) {
        const int64_t steps = S / div;
        if (S % div != 0 || steps % (S / block) != 0) continue;  // steps must split evenly over the blocks
        GridSetting g{"steps " + std::to_string(steps), block, cache, exact_params(S)};
        g.params.block_length = block;
        g.params.steps = steps;
        g.params.cache = cm;
        g.exact = div == 1 && block == S && cm == CacheMode::kNone;
        out.push_back(g);
      }
      for (double thr : parse_list<double>(o.thresholds, "--thresholds")) {
        GridSetting g{"threshold " + fmt("%g", thr), block, cache, exact_params(S)};
        g.params.block_length = block;
        g.params.transfer = Transfer::kThreshold;
        g.params.threshold = thr;
        g.params.cache = cm;
        out.push_back(g);
      }
    }
  }
  std::stable_partition(out.begin(), out.end(), [](const GridSetting& g) { return g.exact; });
  if (out.empty() || !out[0].exact)
    fail("study: the grid needs the exact setting (block length --span, cache none)");
  return out;
}

nlohmann::json run_grid(Model& model, const std::vector<int32_t>& stream, const StudyOptions& o,
                        std::string* markdown) {
  const int64_t L = o.window, n = static_cast<int64_t>(stream.size()) / L, S = o.span;
  const int64_t W = std::min(o.windows, n);
  if (S <= 0 || S >= L) fail("--span ", S, " must be in [1, ", L, ")");
  const auto order = window_order(n, o.seed);
  const auto settings = grid_settings(o);
  const size_t G = settings.size();
  std::vector<std::vector<Outcome>> res(G, std::vector<Outcome>(W));
  // Windows outside, settings inside: machine-load drift hits every setting alike; the order of the settings
  // rotates from window to window so that none is always first after a new window (cold caches); one warm-up
  // fill.
  fill(model, span_task(stream, order[0], L, S, o.seed ^ 0x6121ull), settings[0].params);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t w = 0; w < W; ++w) {
    const Task t = span_task(stream, order[w], L, S, o.seed ^ 0x6121ull);
    for (size_t j = 0; j < G; ++j) {
      const size_t g = (j + static_cast<size_t>(w) * 7) % G;
      res[g][w] = fill(model, t, settings[g].params);
    }
    if (!o.quiet)
      std::fprintf(stderr, "\rgrid: window %lld / %lld (%.0f s)", static_cast<long long>(w + 1),
                   static_cast<long long>(W),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!o.quiet) std::fprintf(stderr, "\n");
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> exact_acc_w(W);
  for (int64_t w = 0; w < W; ++w) exact_acc_w[w] = static_cast<double>(res[0][w].correct) / S;
  const double exact_acc = mean_ci(exact_acc_w).first;
  for (size_t g = 0; g < G; ++g) {
    std::vector<double> acc(W), diff(W), tps(W);
    int64_t forwards = 0, forward_tokens = 0;
    for (int64_t w = 0; w < W; ++w) {
      acc[w] = static_cast<double>(res[g][w].correct) / S;
      diff[w] = acc[w] - exact_acc_w[w];
      tps[w] = res[g][w].seconds > 0 ? S / res[g][w].seconds : 0;
      forwards += res[g][w].forwards;
      forward_tokens += res[g][w].forward_tokens;
    }
    const auto [m, ci] = mean_ci(acc);
    const auto [d, dci] = mean_ci(diff);
    rows.push_back(
        {{"schedule", settings[g].schedule},
         {"block_length", settings[g].block},
         {"cache", settings[g].cache},
         {"exact", settings[g].exact},
         {"accuracy", m},
         {"ci95", ci},
         {"diff_vs_exact", d},
         {"diff_ci95", dci},
         {"forwards_per_token", static_cast<double>(forwards) / static_cast<double>(W * S)},
         {"forward_tokens_per_token", static_cast<double>(forward_tokens) / static_cast<double>(W * S)},
         {"median_tokens_per_second", median(tps)}});
  }
  // The answer: the fastest setting whose accuracy is within X points of the exact schedule.
  nlohmann::json answers = nlohmann::json::array();
  for (double x : o.within) {
    int best = -1;
    for (size_t g = 0; g < G; ++g)
      if (rows[g]["accuracy"].get<double>() >= exact_acc - x / 100 - 1e-12 &&
          (best < 0 || rows[g]["median_tokens_per_second"] > rows[best]["median_tokens_per_second"]))
        best = static_cast<int>(g);
    answers.push_back({{"within_points", x}, {"setting", best}, {"row", rows[best]}});
  }

  // Markdown: the table sorted by speed, then the answers.
  std::ostringstream md;
  md << "| schedule | block | cache | accuracy % (95% CI) | vs exact, points (95% CI, paired) | fwd/token | "
        "tokens run/token | median tokens/s |\n|---|---|---|---|---|---|---|---|\n";
  std::vector<size_t> idx(G);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return rows[a]["median_tokens_per_second"].get<double>() >
           rows[b]["median_tokens_per_second"].get<double>();
  });
  for (size_t g : idx) {
    const auto& r = rows[g];
    md << "| "
       << (r["exact"].get<bool>() ? "**" + r["schedule"].get<std::string>() + " (exact)**"
                                  : r["schedule"].get<std::string>())
       << " | " << r["block_length"].get<int64_t>() << " | " << r["cache"].get<std::string>() << " | "
       << fmt("%.1f", 100 * r["accuracy"].get<double>()) << " ± "
       << fmt("%.1f", 100 * r["ci95"].get<double>()) << " | "
       << fmt("%+.1f", 100 * r["diff_vs_exact"].get<double>()) << " ± "
       << fmt("%.1f", 100 * r["diff_ci95"].get<double>()) << " | "
       << fmt("%.3f", r["forwards_per_token"].get<double>()) << " | "
       << fmt("%.1f", r["forward_tokens_per_token"].get<double>()) << " | "
       << fmt("%.0f", r["median_tokens_per_second"].get<double>()) << " |\n";
  }
  md << "\n";
  for (const auto& a : answers) {
    const auto& r = a["row"];
    md << "* **within " << fmt("%g", a["within_points"].get<double>()) << " point(s) of exact** ("
       << fmt("%.1f", 100 * exact_acc) << " %, "
       << fmt("%.0f", rows[0]["median_tokens_per_second"].get<double>())
       << " tokens/s): " << r["schedule"].get<std::string>() << ", block " << r["block_length"].get<int64_t>()
       << ", cache " << r["cache"].get<std::string>() << ": "
       << fmt("%.1f", 100 * r["accuracy"].get<double>()) << " % ("
       << fmt("%+.1f", 100 * r["diff_vs_exact"].get<double>()) << " ± "
       << fmt("%.1f", 100 * r["diff_ci95"].get<double>()) << " points), "
       << fmt("%.0f", r["median_tokens_per_second"].get<double>()) << " tokens/s ("
       << fmt("%.1f",
              r["median_tokens_per_second"].get<double>() / rows[0]["median_tokens_per_second"].get<double>())
       << "x), " << fmt("%.3f", r["forwards_per_token"].get<double>()) << " forwards/token\n";
  }
  *markdown = md.str();
  return {{"windows", W},
          {"span", S},
          {"tokens", W * S},
          {"exact_accuracy", exact_acc},
          {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
          {"settings", rows},
          {"answers", answers}};
}

void run_study(const StudyOptions& o) {
  const auto started = std::chrono::steady_clock::now();
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const auto parts = parse_list<std::string>(o.parts, "--parts");
  auto has = [&](const char* p) { return std::find(parts.begin(), parts.end(), p) != parts.end(); };
  for (const auto& p : parts)
    if (p != "loss" && p != "metric" && p != "grid")
      fail("--parts: '", p, "' is not one of loss, metric, grid");
  const Tokenizer tok = load_model_tokenizer(o.model);
  auto model = load_model_or_throw(o.model, parse_dtype(o.dtype), o.threads, o.quiet);
  const ModelInfo& mi = model->info();
  int64_t files = 0;
  const std::vector<int32_t> stream = heldout_stream(o, tok, mi.eos_id, &files);
  if (static_cast<int64_t>(stream.size()) < o.window)
    fail("study: the held-out stream is shorter than a window");
  const std::string load_before = loadavg();
  if (!o.quiet)
    std::fprintf(stderr, "study: %lld held-out files, %zu tokens, %zu windows of %lld; load %s\n",
                 static_cast<long long>(files), stream.size(), stream.size() / o.window,
                 static_cast<long long>(o.window), load_before.c_str());
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  nlohmann::json out = {{"command", command_line()},
                        {"date", date},
                        {"model", o.model},
                        {"dtype", o.dtype},
                        {"threads", o.threads},
                        {"heldout_files", files},
                        {"heldout_tokens", stream.size()},
                        {"window", o.window},
                        {"loadavg_before", load_before}};
  std::string grid_md;
  if (has("loss")) out["loss"] = run_loss(*model, stream, o);
  if (has("metric")) out["metric"] = run_metric(*model, stream, o);
  if (has("grid")) out["grid"] = run_grid(*model, stream, o, &grid_md);
  out["loadavg_after"] = loadavg();
  out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::ostringstream md;
  md << "Produced by `" << out["command"].get<std::string>() << "` (" << date << ", " << o.dtype << ", "
     << o.threads << " thread(s), load average before / after: " << load_before << " / "
     << out["loadavg_after"].get<std::string>() << ", " << fmt("%.0f", out["seconds"].get<double>())
     << " s in all). Held-out stream: " << files << " files, " << stream.size() << " tokens, "
     << stream.size() / o.window << " windows of " << o.window << ".\n\n";
  if (has("loss")) {
    md << "### Held-out masked-token loss (all windows, engine; masks from the study's own RNG)\n\n"
          "| mask ratio | CE (nats) | accuracy | masked tokens |\n|---|---|---|---|\n";
    for (auto& [k, v] : out["loss"].items())
      md << "| " << k << " | " << fmt("%.3f", v["masked_token_ce"].get<double>()) << " | "
         << fmt("%.3f", v["masked_token_acc"].get<double>()) << " | " << v["masked_tokens"].get<int64_t>()
         << " |\n";
    md << "\n";
  }
  if (has("metric")) {
    md << "### Infill accuracy (exact-token, held-out windows)\n\n"
          "| task | schedule | windows | tokens | accuracy % (95% CI) |\n|---|---|---|---|---|\n";
    for (const auto& r : out["metric"])
      md << "| " << r["task"].get<std::string>() << " | " << r["schedule"].get<std::string>() << " | "
         << r["windows"].get<int64_t>() << " | " << r["tokens"].get<int64_t>() << " | "
         << fmt("%.1f", 100 * r["accuracy"].get<double>()) << " ± "
         << fmt("%.1f", 100 * r["ci95"].get<double>()) << " |\n";
    md << "\n";
  }
  if (has("grid")) {
    md << "### Scheduler study: span " << o.span << " inside " << o.window << "-token windows, "
       << out["grid"]["windows"].get<int64_t>() << " windows (" << out["grid"]["tokens"].get<int64_t>()
       << " tokens)\n\n"
       << grid_md << "\n";
  }
  if (!o.out_json.empty()) {
    std::ofstream f(o.out_json);
    f << out.dump(1) << "\n";
    if (!f) fail(o.out_json, ": cannot write");
  }
  if (!o.out_md.empty()) {
    std::ofstream f(o.out_md);
    f << md.str();
    if (!f) fail(o.out_md, ": cannot write");
  }
  std::printf("%s", md.str().c_str());
}

void setup(CLI::App& app) {
  auto o = std::make_shared<StudyOptions>();
  auto* cmd = app.add_subcommand(
      "study",
      "Held-out evaluation: masked-token loss, infill accuracy of spans / suffixes, and the scheduler study "
      "(steps, "
      "threshold, block length, cache vs accuracy and tokens/s; the fastest setting within X points of "
      "exact). "
      "Needs the model's held-out source files (models/demo: the Python 3.11 standard library)");
  cmd->add_option("-m,--model", o->model, "Model directory")->capture_default_str();
  cmd->add_option("--heldout-list", o->heldout_list, "Held-out file list (one path a line, # comments)")
      ->capture_default_str();
  cmd->add_option("--heldout-root", o->heldout_root, "Directory the listed paths are relative to")
      ->capture_default_str();
  cmd->add_option("--parts", o->parts, "Which parts: loss, metric, grid (comma separated)")
      ->capture_default_str();
  cmd->add_option("--window", o->window, "Window length in tokens (the model's training context)")
      ->capture_default_str();
  cmd->add_option("--loss-ratios", o->loss_ratios, "loss: mask ratios")->capture_default_str();
  cmd->add_option("--metric-windows", o->metric_windows, "metric: windows per task")->capture_default_str();
  cmd->add_option("--metric-spans", o->metric_spans, "metric: span lengths")->capture_default_str();
  cmd->add_option("--metric-suffixes", o->metric_suffixes, "metric: suffix lengths")->capture_default_str();
  cmd->add_option("--windows", o->windows, "grid: windows")->capture_default_str();
  cmd->add_option("--span", o->span, "grid: span length (gen_length of every setting)")
      ->capture_default_str();
  cmd->add_option("--block-lengths", o->block_lengths, "grid: block lengths")->capture_default_str();
  cmd->add_option("--thresholds", o->thresholds, "grid: Fast-dLLM thresholds")->capture_default_str();
  cmd->add_option("--caches", o->caches, "grid: cache modes")->capture_default_str();
  cmd->add_option("--within", o->within, "grid: answer for these accuracy margins (points)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the window order, span places and loss masks")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, kDtypeHelp)->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--out-json", o->out_json, "Write every number here");
  cmd->add_option("--out-md", o->out_md, "Write the markdown report here (also printed)");
  cmd->add_flag("-q,--quiet", o->quiet, "No progress on stderr");
  cmd->callback([o] { run_study(*o); });
}

RegisterCommand registration("study", setup);

}  // namespace
}  // namespace dllm::cli
