// The measurements of the study: the held-out stream, and the loss, metric and grid parts.
#include "study/study.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/error.h"
#include "core/file.h"
#include "denoise/strategy_names.h"
#include "study/report.h"

namespace dllm::study {

double token_similarity(const int32_t* a, const int32_t* b, int64_t n) {
  std::vector<int64_t> prev(n + 1), cur(n + 1);
  std::iota(prev.begin(), prev.end(), 0);
  for (int64_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (int64_t j = 1; j <= n; ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return n > 0 ? std::max(0.0, 1.0 - static_cast<double>(prev[n]) / static_cast<double>(n)) : 1.0;
}

namespace {

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
  double similarity = 0;  // token_similarity of the filled span
};

Outcome fill(Model& model, const Task& t, const GenerateParams& p) {
  std::vector<int32_t> canvas = t.truth;
  std::fill(canvas.begin() + t.begin, canvas.begin() + t.begin + t.length, model.info().mask_id);
  const auto r = infill(model, {canvas}, p).value();
  Outcome o;
  for (int64_t i = t.begin; i < t.begin + t.length; ++i) o.correct += r.outputs[0][i] == t.truth[i];
  o.similarity = token_similarity(r.outputs[0].data() + t.begin, t.truth.data() + t.begin, t.length);
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

// One setting of the scheduler study.
struct GridSetting {
  std::string schedule;  // "steps N" | "threshold T"
  int64_t block = 0;
  std::string cache;
  GenerateParams params;
  bool exact = false;
};

std::vector<GridSetting> grid_settings(const StudyConfig& c) {
  const int64_t S = c.span;
  std::vector<GridSetting> out;
  for (int64_t block : c.block_lengths) {
    if (block <= 0 || S % block != 0) fail("--block-lengths: ", block, " does not divide --span ", S);
    for (const auto& cache : c.caches) {
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
      for (double thr : c.thresholds) {
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

}  // namespace

HeldoutStream read_heldout_stream(const std::string& list, const std::string& corpus, const Tokenizer& tok,
                                  int32_t eos) {
  if (corpus.empty())
    fail("study: no corpus: give --corpus DIR, the directory the paths in ", list, " are relative to");
  std::error_code ec;
  if (!std::filesystem::is_directory(corpus, ec)) fail("--corpus ", corpus, ": not a directory");
  std::ifstream in(list);
  if (!in) fail(list, ": cannot open");
  HeldoutStream out;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto ids =
        tok.encode(read_whole_file(corpus + "/" + line,
                                   " (listed in " + list + "; the held-out files are read from --corpus)"),
                   /*add_special_tokens=*/false);
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
    out.tokens.push_back(eos);
    ++out.files;
  }
  if (out.files == 0) fail(list, ": lists no file");
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Over independent units (windows).
std::pair<double, double> mean_ci(const std::vector<double>& v) {
  const double n = static_cast<double>(v.size());
  if (n == 0) return {0, 0};
  const double m = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  const double sd = n > 1 ? std::sqrt(ss / (n - 1)) : 0;
  return {m, 1.96 * sd / std::sqrt(n)};
}

// ---- loss: masked-token CE / accuracy over all consecutive windows at fixed ratios ----
nlohmann::json run_loss(Model& model, const std::vector<int32_t>& stream, const StudyConfig& c) {
  const ModelInfo& mi = model.info();
  const int64_t L = c.window, n = static_cast<int64_t>(stream.size()) / L, V = mi.vocab_size;
  nlohmann::json out = nlohmann::json::object();
  for (double ratio : c.loss_ratios) {
    Mix rng{c.seed ^ 0x10550000ull ^ static_cast<uint64_t>(std::llround(ratio * 1000))};
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
    if (!c.quiet)
      std::fprintf(stderr,
                   "loss: ratio %g: CE %.4f, acc %.4f over %lld masked tokens of %lld windows (%.1f s)\n",
                   ratio, ce / count, static_cast<double>(correct) / count, static_cast<long long>(count),
                   static_cast<long long>(n), secs);
  }
  return out;
}

// ---- metric: infill accuracy of spans and suffixes with the exact schedule (and one-step parallel decoding)
nlohmann::json run_metric(Model& model, const std::vector<int32_t>& stream, const StudyConfig& c) {
  const int64_t L = c.window, n = static_cast<int64_t>(stream.size()) / L;
  const int64_t W = std::min(c.metric_windows, n);
  const auto order = window_order(n, c.seed);
  nlohmann::json out = nlohmann::json::array();
  struct Kind {
    std::string name;
    int64_t length;
    bool suffix;
  };
  std::vector<Kind> kinds;
  for (int64_t s : c.metric_spans) kinds.push_back({"span " + std::to_string(s), s, false});
  for (int64_t s : c.metric_suffixes) kinds.push_back({"suffix " + std::to_string(s), s, true});
  for (const auto& k : kinds) {
    if (k.length <= 0 || k.length >= L) fail("study: span length ", k.length, " must be in [1, ", L, ")");
    for (int one_step = 0; one_step < 2; ++one_step) {
      GenerateParams p = exact_params(k.length);
      if (one_step) p.steps = 1;
      std::vector<double> acc, sim;
      int64_t correct = 0, forwards = 0;
      double secs = 0;
      for (int64_t w = 0; w < W; ++w) {
        const Task t = k.suffix ? suffix_task(stream, order[w], L, k.length)
                                : span_task(stream, order[w], L, k.length, c.seed);
        const Outcome r = fill(model, t, p);
        acc.push_back(static_cast<double>(r.correct) / static_cast<double>(k.length));
        sim.push_back(r.similarity);
        correct += r.correct;
        forwards += r.forwards;
        secs += r.seconds;
      }
      const auto [m, ci] = mean_ci(acc);
      const auto [sm, sci] = mean_ci(sim);
      const std::string schedule = one_step ? "1 step (all at once)" : "exact (1 token/step)";
      out.push_back({{"task", k.name},
                     {"schedule", schedule},
                     {"windows", W},
                     {"tokens", W * k.length},
                     {"accuracy", m},
                     {"ci95", ci},
                     {"similarity", sm},
                     {"similarity_ci95", sci},
                     {"forwards", forwards},
                     {"seconds", secs}});
      if (!c.quiet)
        std::fprintf(stderr, "metric: %-10s %-22s acc %.4f +- %.4f (%lld windows, %.1f s)\n", k.name.c_str(),
                     schedule.c_str(), m, ci, static_cast<long long>(W), secs);
    }
  }
  return out;
}

// ---- grid: the scheduler study ----
nlohmann::json run_grid(Model& model, const std::vector<int32_t>& stream, const StudyConfig& c,
                        std::string* markdown) {
  const int64_t L = c.window, n = static_cast<int64_t>(stream.size()) / L, S = c.span;
  const int64_t W = std::min(c.windows, n);
  if (S <= 0 || S >= L) fail("--span ", S, " must be in [1, ", L, ")");
  const auto order = window_order(n, c.seed);
  const auto settings = grid_settings(c);
  const size_t G = settings.size();
  std::vector<std::vector<Outcome>> res(G, std::vector<Outcome>(W));
  // Windows outside, settings inside: machine-load drift hits every setting alike; the order of the settings
  // rotates from window to window so that none is always first after a new window (cold caches); one warm-up
  // fill.
  fill(model, span_task(stream, order[0], L, S, c.seed ^ 0x6121ull), settings[0].params);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t w = 0; w < W; ++w) {
    const Task t = span_task(stream, order[w], L, S, c.seed ^ 0x6121ull);
    for (size_t j = 0; j < G; ++j) {
      const size_t g = (j + static_cast<size_t>(w) * 7) % G;
      res[g][w] = fill(model, t, settings[g].params);
    }
    if (!c.quiet)
      std::fprintf(stderr, "\rgrid: window %lld / %lld (%.0f s)", static_cast<long long>(w + 1),
                   static_cast<long long>(W),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!c.quiet) std::fprintf(stderr, "\n");
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> exact_acc_w(W);
  for (int64_t w = 0; w < W; ++w) exact_acc_w[w] = static_cast<double>(res[0][w].correct) / S;
  const double exact_acc = mean_ci(exact_acc_w).first;
  for (size_t g = 0; g < G; ++g) {
    std::vector<double> acc(W), diff(W), tps(W), sim(W);
    int64_t forwards = 0, forward_tokens = 0;
    for (int64_t w = 0; w < W; ++w) {
      acc[w] = static_cast<double>(res[g][w].correct) / S;
      sim[w] = res[g][w].similarity;
      diff[w] = acc[w] - exact_acc_w[w];
      tps[w] = res[g][w].seconds > 0 ? S / res[g][w].seconds : 0;
      forwards += res[g][w].forwards;
      forward_tokens += res[g][w].forward_tokens;
    }
    const auto [m, ci] = mean_ci(acc);
    const auto [d, dci] = mean_ci(diff);
    const auto [sm, sci] = mean_ci(sim);
    rows.push_back(
        {{"schedule", settings[g].schedule},
         {"block_length", settings[g].block},
         {"cache", settings[g].cache},
         {"exact", settings[g].exact},
         {"accuracy", m},
         {"ci95", ci},
         {"diff_vs_exact", d},
         {"diff_ci95", dci},
         {"similarity", sm},
         {"similarity_ci95", sci},
         {"forwards_per_token", static_cast<double>(forwards) / static_cast<double>(W * S)},
         {"forward_tokens_per_token", static_cast<double>(forward_tokens) / static_cast<double>(W * S)},
         {"median_tokens_per_second", median(tps)}});
  }
  // The answer: the fastest setting whose accuracy is within X points of the exact schedule.
  nlohmann::json answers = nlohmann::json::array();
  for (double x : c.within) {
    int best = -1;
    for (size_t g = 0; g < G; ++g)
      if (rows[g]["accuracy"].get<double>() >= exact_acc - x / 100 - 1e-12 &&
          (best < 0 || rows[g]["median_tokens_per_second"] > rows[best]["median_tokens_per_second"]))
        best = static_cast<int>(g);
    answers.push_back({{"within_points", x}, {"setting", best}, {"row", rows[best]}});
  }
  *markdown = grid_markdown(rows, answers, exact_acc);
  return {{"windows", W},
          {"span", S},
          {"tokens", W * S},
          {"exact_accuracy", exact_acc},
          {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
          {"settings", rows},
          {"answers", answers}};
}

}  // namespace dllm::study
