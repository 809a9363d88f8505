// The study's markdown report, and run_study, which runs the parts and records them.
#include "study/report.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "study/study.h"

namespace dllm::study {

std::string fmt(const char* format, double value) {
  char b[64];
  std::snprintf(b, sizeof b, format, value);
  return b;
}

std::string grid_markdown(const nlohmann::json& rows, const nlohmann::json& answers, double exact_acc) {
  const size_t G = rows.size();
  std::ostringstream md;
  md << "| schedule | block | cache | accuracy % (95% CI) | vs exact, points (95% CI, paired) | "
        "similarity % (95% CI) | fwd/token | tokens run/token | median tokens/s |\n"
        "|---|---|---|---|---|---|---|---|---|\n";
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
       << fmt("%.1f", 100 * r["similarity"].get<double>()) << " ± "
       << fmt("%.1f", 100 * r["similarity_ci95"].get<double>()) << " | "
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
  return md.str();
}

std::string report_markdown(const nlohmann::json& out, const std::string& grid_md) {
  const int64_t window = out["window"].get<int64_t>();
  const int64_t tokens = out["heldout_tokens"].get<int64_t>();
  std::ostringstream md;
  md << "Produced by `" << out["command"].get<std::string>() << "` (" << out["date"].get<std::string>()
     << ", " << out["dtype"].get<std::string>() << ", " << out["threads"].get<int>()
     << " thread(s), load average before / after: " << out["loadavg_before"].get<std::string>() << " / "
     << out["loadavg_after"].get<std::string>() << ", " << fmt("%.0f", out["seconds"].get<double>())
     << " s in all). Held-out stream: " << out["heldout_files"].get<int64_t>() << " files, " << tokens
     << " tokens, " << tokens / window << " windows of " << window << ".\n\n";
  if (out.contains("loss")) {
    md << "### Held-out masked-token loss (all windows, engine; masks from the study's own RNG)\n\n"
          "| mask ratio | CE (nats) | accuracy | masked tokens |\n|---|---|---|---|\n";
    for (auto& [k, v] : out["loss"].items())
      md << "| " << k << " | " << fmt("%.3f", v["masked_token_ce"].get<double>()) << " | "
         << fmt("%.3f", v["masked_token_acc"].get<double>()) << " | " << v["masked_tokens"].get<int64_t>()
         << " |\n";
    md << "\n";
  }
  if (out.contains("metric")) {
    md << "### Infill accuracy (held-out windows)\n\n"
          "Exact-token accuracy, and similarity = 1 - token edit distance / span length (a right but shifted "
          "fill "
          "scores high here, low in accuracy).\n\n"
          "| task | schedule | windows | tokens | accuracy % (95% CI) | similarity % (95% CI) |\n"
          "|---|---|---|---|---|---|\n";
    for (const auto& r : out["metric"])
      md << "| " << r["task"].get<std::string>() << " | " << r["schedule"].get<std::string>() << " | "
         << r["windows"].get<int64_t>() << " | " << r["tokens"].get<int64_t>() << " | "
         << fmt("%.1f", 100 * r["accuracy"].get<double>()) << " ± "
         << fmt("%.1f", 100 * r["ci95"].get<double>()) << " | "
         << fmt("%.1f", 100 * r["similarity"].get<double>()) << " ± "
         << fmt("%.1f", 100 * r["similarity_ci95"].get<double>()) << " |\n";
    md << "\n";
  }
  if (out.contains("grid")) {
    md << "### Scheduler study: span " << out["grid"]["span"].get<int64_t>() << " inside " << window
       << "-token windows, " << out["grid"]["windows"].get<int64_t>() << " windows ("
       << out["grid"]["tokens"].get<int64_t>() << " tokens)\n\n"
       << grid_md << "\n";
  }
  return md.str();
}

void check_config(const StudyConfig& c) {
  for (const auto& p : c.parts)
    if (p != "loss" && p != "metric" && p != "grid")
      fail("--parts: '", p, "' is not one of loss, metric, grid");
  if (c.window <= 0) fail("--window ", c.window, " must be > 0");
}

StudyReport run_study(Model& model, const HeldoutStream& stream, const StudyConfig& c, const RunInfo& run) {
  const auto started = run.started.value_or(std::chrono::steady_clock::now());
  check_config(c);
  auto has = [&](const char* p) { return std::find(c.parts.begin(), c.parts.end(), p) != c.parts.end(); };
  if (static_cast<int64_t>(stream.tokens.size()) < c.window)
    fail("study: the held-out stream is shorter than a window");
  auto load = [&] { return run.load_average ? run.load_average() : std::string(); };
  const std::string load_before = load();
  if (!c.quiet)
    std::fprintf(stderr, "study: %lld held-out files, %zu tokens, %zu windows of %lld; load %s\n",
                 static_cast<long long>(stream.files), stream.tokens.size(), stream.tokens.size() / c.window,
                 static_cast<long long>(c.window), load_before.c_str());
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  StudyReport r;
  r.json = {{"command", run.command},
            {"date", date},
            {"model", run.model},
            {"dtype", run.dtype},
            {"threads", run.threads},
            {"heldout_files", stream.files},
            {"heldout_tokens", stream.tokens.size()},
            {"window", c.window},
            {"loadavg_before", load_before}};
  std::string grid_md;
  if (has("loss")) r.json["loss"] = run_loss(model, stream.tokens, c);
  if (has("metric")) r.json["metric"] = run_metric(model, stream.tokens, c);
  if (has("grid")) r.json["grid"] = run_grid(model, stream.tokens, c, &grid_md);
  r.json["loadavg_after"] = load();
  r.json["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  r.markdown = report_markdown(r.json, grid_md);
  return r;
}

}  // namespace dllm::study
