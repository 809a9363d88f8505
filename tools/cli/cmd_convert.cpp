// `dllm convert`: write a Hugging Face LLaDA / Dream directory as a GGUF file that llama.cpp and dllm both
// load. `dllm quant-eval`: measure what quantized weights cost (KL divergence, top-1 agreement on masked
// positions).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "command.h"
#include "common.h"
#include "convert/gguf_convert.h"
#include "core/error.h"

namespace dllm::cli {
namespace {

struct ConvertOptions {
  std::string model, out, type = "f16";
  bool quiet = false;
};

void run_convert(const ConvertOptions& o) {
  const GgmlType type = parse_gguf_type(o.type);
  auto bar = [&](const ConvertProgress& p) {
    if (o.quiet) return;
    constexpr int kWidth = 30;
    const double frac =
        p.total_bytes ? static_cast<double>(p.bytes) / static_cast<double>(p.total_bytes) : 1.0;
    const int fill = static_cast<int>(frac * kWidth);
    std::fprintf(stderr, "\r[%.*s%*s] %3d%% %zu/%zu tensors %-28.28s", fill,
                 "==============================", kWidth - fill, "", static_cast<int>(frac * 100), p.tensor,
                 p.tensors, p.name.c_str());
    std::fflush(stderr);
  };
  const ConvertResult r = convert_hf_to_gguf(o.model, o.out, type, bar);
  if (!o.quiet) {
    std::fprintf(stderr, "\n");
    // Each fallback by name, as llama-quantize reports them.
    for (const ConvertFallback& f : r.fallbacks)
      std::fprintf(stderr, "dllm: %s\n", describe_fallback(f).c_str());
    std::fprintf(stderr, "dllm: wrote %s (%s, %zu tensors, %.1f MB, requested type %s): %s\n", o.out.c_str(),
                 r.architecture.c_str(), r.tensors, static_cast<double>(r.bytes) / 1e6, o.type.c_str(),
                 describe_type_mix(r.tensors_by_type).c_str());
  }
  // Said even with -q: the file is not all of the type asked for.
  if (!r.fallbacks.empty())
    std::fprintf(stderr,
                 "dllm: warning: %zu weight matrices are not %s (their rows are not whole blocks): %s%s\n",
                 r.fallbacks.size(), o.type.c_str(), describe_fallback(r.fallbacks.front()).c_str(),
                 r.fallbacks.size() > 1 ? ", and others" : "");
}

void setup(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  auto* cmd =
      app.add_subcommand("convert", "Convert a Hugging Face model directory to GGUF (llama.cpp layout)");
  cmd->add_option("-m,--model", o->model, "Model directory (Hugging Face layout)")->required();
  cmd->add_option("-o,--out", o->out, "Output .gguf file")->required();
  cmd->add_option(
         "--type", o->type,
         "Type of the 2-D weights: f32 | f16 | bf16 | q8_0 | q4_0 | q4_k | q6_k (norms stay f32; rows that "
         "are not whole blocks fall back: q4_k -> q4_0 -> f16, q8_0 / q6_k -> f16; each fallback is named "
         "and "
         "the summary gives the file's real mix of types)")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", o->quiet, "No progress bar");
  add_hub_options(cmd);
  cmd->callback([o] {
    o->model = resolve_model(o->model, o->quiet);  // a Hugging Face id -> its snapshot in the cache
    run_convert(*o);
  });
}

RegisterCommand registration("convert", setup);

// `dllm quant-eval`: how far quantized weights move the model, llama.cpp style (its KL-divergence
// statistics), on what a diffusion model predicts: masked positions. Sequences of random tokens with a
// fraction masked run through the reference and each quantized model; per masked position, KL(P_ref ||
// P_quant) of the softmax distributions and whether the top-1 tokens agree (Dream: the logits are shifted, as
// in generation).
struct EvalOptions {
  std::string reference;
  std::vector<std::string> quantized;
  int64_t seqs = 16, length = 64;
  double mask_fraction = 0.5;
  uint64_t seed = 0;
  int threads = 0;
  std::string
      ids_file;  // token ids (any separators, e.g. `dllm tokenize` output): rows instead of random tokens
  // "masked": the positions above, masked; "perplexity": llama-perplexity --kl-divergence's layout (no mask,
  // consecutive rows of the ids file, logits rows [length/2, length - 1) compared as they are), so the same
  // file's statistics from llama.cpp's kernels compare with ours.
  std::string layout = "masked";
};

void log_softmax(const float* x, int64_t n, std::vector<double>& out) {
  out.resize(static_cast<size_t>(n));
  double mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, double(x[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int64_t i = 0; i < n; ++i) out[i] = double(x[i]) - lse;
}

void run_eval(const EvalOptions& o) {
  auto ref = load_model_or_throw(o.reference, Precision::kF32, o.threads, true);
  const ModelInfo& info = ref->info();
  std::mt19937_64 rng(o.seed);
  // Token rows: random ids below the special ids' range where possible, a fraction replaced by the mask id.
  std::vector<std::vector<int32_t>> rows;
  std::vector<std::vector<int64_t>> masked;
  const int64_t ordinary = std::max<int64_t>(
      2, std::min<int64_t>(info.vocab_size, info.mask_id > 0 ? info.mask_id : info.vocab_size) - 32);
  if (o.layout != "masked" && o.layout != "perplexity")
    fail("--layout must be masked or perplexity, got '", o.layout, "'");
  const bool perplexity = o.layout == "perplexity";
  if (perplexity && o.ids_file.empty()) fail("--layout perplexity needs --ids-file (the text's token ids)");
  std::vector<int32_t> stream;
  if (!o.ids_file.empty()) {
    FILE* f = std::fopen(o.ids_file.c_str(), "rb");
    if (!f) fail(o.ids_file, ": cannot open");
    int64_t v = -1;
    for (int c = std::fgetc(f);; c = std::fgetc(f)) {
      if (c >= '0' && c <= '9') {
        v = (v < 0 ? 0 : v * 10) + (c - '0');
        if (v >= info.vocab_size) fail(o.ids_file, ": token id ", v, " is outside the vocabulary");
      } else {
        if (v >= 0) stream.push_back(static_cast<int32_t>(v));
        v = -1;
        if (c == EOF) break;
      }
    }
    std::fclose(f);
    if (static_cast<int64_t>(stream.size()) < o.length) fail(o.ids_file, ": fewer than --length ids");
  }
  for (int64_t s = 0; s < o.seqs; ++s) {
    std::vector<int32_t> row(static_cast<size_t>(o.length));
    if (stream.empty()) {
      for (auto& t : row) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(ordinary));
    } else {
      if (static_cast<int64_t>(stream.size()) < (s + 1) * o.length) break;
      std::copy_n(stream.begin() + s * o.length, o.length, row.begin());
    }
    std::vector<int64_t> pos;
    if (perplexity) {
      for (int64_t i = o.length / 2; i < o.length - 1; ++i) pos.push_back(i);
    } else {
      for (int64_t i = 1; i < o.length; ++i)
        if (std::uniform_real_distribution<double>(0, 1)(rng) < o.mask_fraction) {
          row[i] = info.mask_id;
          pos.push_back(i);
        }
    }
    rows.push_back(row);
    masked.push_back(pos);
  }
  auto run = [&](Model& m, size_t s) {
    ForwardInput in;
    in.tokens = rows[s];
    return m.forward(in).value();
  };
  std::vector<std::vector<float>> ref_logits;
  for (size_t s = 0; s < rows.size(); ++s) ref_logits.push_back(run(*ref, s));
  const int64_t V = info.vocab_size;
  std::printf("| weights | file MB | mean KL | p99 KL | max KL | top-1 agreement | positions |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const auto& path : o.quantized) {
    auto q = load_model_or_throw(path, Precision::kF32, o.threads, true);
    if (q->info().vocab_size != V) fail(path, ": vocabulary differs from the reference");
    std::vector<double> kls;
    int64_t agree = 0;
    std::vector<double> lp, lq;
    for (size_t s = 0; s < rows.size(); ++s) {
      const auto ql = run(*q, s);
      for (int64_t pos : masked[s]) {
        const int64_t at = info.shift_logits && !perplexity ? pos - 1 : pos;
        const float* a = ref_logits[s].data() + at * V;
        const float* b = ql.data() + at * V;
        log_softmax(a, V, lp);
        log_softmax(b, V, lq);
        double kl = 0;
        for (int64_t v = 0; v < V; ++v) kl += std::exp(lp[v]) * (lp[v] - lq[v]);
        kls.push_back(std::max(0.0, kl));
        agree += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
      }
    }
    std::vector<double> sorted = kls;
    std::sort(sorted.begin(), sorted.end());
    double mean = 0;
    for (double k : kls) mean += k;
    mean /= std::max<size_t>(1, kls.size());
    FILE* f = std::fopen(path.c_str(), "rb");
    double mb = 0;
    if (f) {
      std::fseek(f, 0, SEEK_END);
      mb = static_cast<double>(std::ftell(f)) / 1e6;
      std::fclose(f);
    }
    std::printf("| %s | %.2f | %.6f | %.6f | %.6f | %.2f%% | %zu |\n", path.c_str(), mb, mean,
                sorted.empty() ? 0.0 : sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)],
                sorted.empty() ? 0.0 : sorted.back(), kls.empty() ? 0.0 : 100.0 * agree / double(kls.size()),
                kls.size());
  }
}

void setup_eval(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  auto* cmd =
      app.add_subcommand("quant-eval",
                         "KL divergence and top-1 agreement of quantized models vs a reference, on masked "
                         "positions (prints a markdown table)");
  cmd->add_option("-m,--model", o->reference, "Reference model (HF directory or F32 GGUF), run in f32")
      ->required();
  cmd->add_option("-q,--quantized", o->quantized, "Quantized GGUF file(s) to compare")->required();
  cmd->add_option("--seqs", o->seqs, "Number of sequences")->capture_default_str();
  cmd->add_option("--length", o->length, "Tokens per sequence")->capture_default_str();
  cmd->add_option("--mask-fraction", o->mask_fraction, "Fraction of positions masked")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed of the token rows and the masks")->capture_default_str();
  cmd->add_option(
         "--ids-file", o->ids_file,
         "Held-out token ids (any separators, e.g. `dllm tokenize` output) cut into rows of --length "
         "instead of random tokens")
      ->capture_default_str();
  cmd->add_option("--layout", o->layout,
                  "masked: --mask-fraction of each row masked, the masked positions scored; perplexity: "
                  "llama-perplexity --kl-divergence's layout (no mask, consecutive rows of --ids-file of "
                  "--length tokens, logits rows [length/2, length - 1) scored as they are), to compare with "
                  "llama.cpp's own statistics for the same files")
      ->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (0 = all cores)")->capture_default_str();
  add_weights_option(cmd);  // auto: the int8 kernels as generation runs them; f32: the format alone
  cmd->callback([o] { run_eval(*o); });
}

RegisterCommand eval_registration("quant-eval", setup_eval);

}  // namespace
}  // namespace dllm::cli
