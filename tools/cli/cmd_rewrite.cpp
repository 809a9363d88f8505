// `dllm rewrite`: re-denoise part of a file in place, with the rest of the file as fixed context on both
// sides, and optionally refine it: remask the least confident tokens of the part and denoise them again
// (ReMDM / RCR style: the confidence is the score each token was committed with). docs/denoising.md
// "Rewriting a span".
#include <algorithm>
#include <climits>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "common.h"
#include "core/error.h"
#include "core/file.h"
#include "denoise/canvas_edit.h"
#include "denoise_flags.h"
#include "io/json_file.h"
#include "model/model_tokenizer.h"
#include "rewrite_text.h"
#include "tokenizer/tokenizer.h"

namespace dllm::cli {
namespace {

struct RewriteOptions {
  std::string model = default_model_path();
  std::string file;
  std::string lines;
  int64_t length = 0;   // tokens of the new span; 0 = as many as the old span has
  int64_t context = 0;  // tokens of context kept on each side; 0 = all that fits the model
  int64_t refine = 0;
  int64_t refine_tokens = 0;  // 0 = a quarter of the span
  bool diff = false;
  bool json = false;
  bool quiet = false;
  std::string dtype = "auto";
  int threads = 0;
  GenerateParams params;
  DenoiseFlags denoise;
};

void run_rewrite(const RewriteOptions& o) {
  if (!file_exists(o.file)) fail(o.file, ": no such file");
  if (o.lines.empty()) fail("--lines A-B: which lines to rewrite");
  if (o.refine < 0) fail("--refine ", o.refine, ": must be >= 0");
  if (o.length < 0 || o.refine_tokens < 0) fail("--length and --refine-tokens must be >= 0");
  if (!has_model_tokenizer(o.model))
    fail(o.model, ": no tokenizer.json; rewrite needs the model's tokenizer");
  const std::string text = read_whole_file(o.file);
  const ByteRange bytes = line_bytes(text, parse_line_range(o.lines));
  const std::string prefix = text.substr(0, bytes.begin),
                    old_span = text.substr(bytes.begin, bytes.end - bytes.begin);
  const std::string suffix = text.substr(bytes.end);
  const Tokenizer tok = load_model_tokenizer(o.model);
  auto model = load_model_or_throw(o.model, parse_dtype(o.dtype), o.threads, o.quiet || o.json);
  const int32_t mask = model->info().mask_id;
  if (model->info().autoregressive) fail(o.model, ": an autoregressive model cannot rewrite in context");

  auto before = tok.encode(prefix, false), after = tok.encode(suffix, false);
  const int64_t n = o.length > 0 ? o.length : std::max<int64_t>(1, tok.encode(old_span, false).size());
  // The canvas holds the span and the context nearest to it: --context tokens a side, or as much as the
  // model's positions allow (shared evenly when both sides do not fit). The printed file keeps everything.
  const int64_t room = model->info().max_seq_len > 0 ? model->info().max_seq_len - n : INT64_MAX;
  if (room < 0)
    fail("--lines: the span is ", n, " tokens, more than the model's ", model->info().max_seq_len);
  int64_t keep_before = static_cast<int64_t>(before.size()), keep_after = static_cast<int64_t>(after.size());
  if (o.context > 0)
    keep_before = std::min(keep_before, o.context), keep_after = std::min(keep_after, o.context);
  if (keep_before + keep_after > room) {
    const int64_t half = room / 2;
    if (keep_before <= half)
      keep_after = room - keep_before;
    else if (keep_after <= half)
      keep_before = room - keep_after;
    else
      keep_before = half, keep_after = room - half;
  }
  // The tokenizer reads special-token strings in the text as those tokens: a mask there would be filled too.
  for (const auto* side : {&before, &after})
    if (std::find(side->begin(), side->end(), mask) != side->end())
      fail(o.file, ": the text outside --lines contains the mask token's string (",
           tok.decode(std::vector<int32_t>{mask}, /*skip_special_tokens=*/false),
           "); rewrite cannot keep it as text");
  before.erase(before.begin(), before.end() - keep_before);
  after.resize(keep_after);
  std::vector<int32_t> canvas = before;
  canvas.insert(canvas.end(), n, mask);
  canvas.insert(canvas.end(), after.begin(), after.end());
  const int64_t lo = static_cast<int64_t>(before.size()), hi = lo + n;

  GenerateParams params = o.params;
  apply_denoise_flags(o.denoise, params);
  // Fill the span, then refine: the k least confident tokens of the span (the score each was committed with)
  // go back to masks and are denoised again (denoise/canvas_edit.h).
  CanvasEdit edit{canvas, std::vector<uint8_t>(canvas.size(), 0), o.refine, o.refine_tokens};
  std::fill(edit.editable.begin() + lo, edit.editable.begin() + hi, 1);
  // Bidirectional models remask k tokens per round; block-diffusion ones (LLaDA2.x, SDAR) run LLaDA2.1's
  // editing passes instead, a round being one pass per block (no k).
  const bool passes = model->info().block_size > 0;
  const int64_t k = refine_tokens_per_round(n, o.refine_tokens);
  auto loop = make_canvas_edit_loop(model->info(), std::move(edit), params);
  std::vector<int64_t> changed(o.refine, 0);  // per round: the tokens it changed
  auto run = run_denoise_loop(*model, *loop, [&](const StepEvent& ev) {
    if (ev.block > 0 && ev.block <= o.refine && ev.edited) changed[ev.block - 1] += (*ev.edited)[0].size();
    return true;
  });
  if (!run.ok()) fail(run.error());
  nlohmann::json rounds = nlohmann::json::array();
  for (int64_t r = 0; r < o.refine; ++r) {
    rounds.push_back(passes ? nlohmann::json{{"changed", changed[r]}}
                            : nlohmann::json{{"remasked", k}, {"changed", changed[r]}});
    if (o.quiet || o.json) continue;
    if (passes)
      std::fprintf(stderr, "dllm: refine round %lld (an editing pass): %lld tokens changed\n",
                   static_cast<long long>(r + 1), static_cast<long long>(changed[r]));
    else
      std::fprintf(stderr, "dllm: refine round %lld: %lld of %lld remasked tokens changed\n",
                   static_cast<long long>(r + 1), static_cast<long long>(changed[r]),
                   static_cast<long long>(k));
  }
  canvas = run.value().outputs[0];
  const int64_t forwards = run.value().forwards;

  std::string new_span = tok.decode(std::vector<int32_t>(canvas.begin() + lo, canvas.begin() + hi),
                                    /*skip_special_tokens=*/true);
  // Whole lines in, whole lines out: the text after the span starts on a line of its own.
  if (!old_span.empty() && old_span.back() == '\n' && (new_span.empty() || new_span.back() != '\n'))
    new_span += '\n';
  const std::string result = prefix + new_span + suffix;
  const std::string diff = unified_diff(text, result, o.file);
  if (o.json) {
    const nlohmann::json out = {
        {"text", result},       {"span", new_span},
        {"old_span", old_span}, {"diff", diff},
        {"tokens", n},          {"forwards", forwards},
        {"refine", rounds},     {"span_ids", std::vector<int32_t>(canvas.begin() + lo, canvas.begin() + hi)}};
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::fputs((o.diff ? diff : result).c_str(), stdout);
  if (!o.quiet)
    std::fprintf(stderr, "dllm: rewrote %lld tokens (lines %s) in %lld forwards\n", static_cast<long long>(n),
                 o.lines.c_str(), static_cast<long long>(forwards));
}

void setup(CLI::App& app) {
  auto o = std::make_shared<RewriteOptions>();
  auto* cmd = app.add_subcommand(
      "rewrite",
      "Re-denoise lines of a file in context: the lines become mask tokens (as many as they had, or "
      "--length), "
      "the rest of the file stays fixed on both sides, and the model fills them. Prints the new file (or a "
      "unified diff with --diff). --refine N then runs N rounds that remask the least confident tokens of "
      "the "
      "span (the score each was committed with) and denoise them again");
  cmd->add_option("file", o->file, "The file to rewrite (it is not modified: the result goes to stdout)")
      ->required();
  cmd->add_option("--lines", o->lines, "Lines to rewrite: A-B (1-based, inclusive) or A")->required();
  cmd->add_option("-m,--model", o->model, "Diffusion model directory (with tokenizer.json) or .gguf file")
      ->capture_default_str();
  cmd->add_option("--length", o->length, "Tokens of the new text (0 = as many as the lines had)")
      ->capture_default_str();
  cmd->add_option("--context", o->context,
                  "Tokens of context on each side of the span (0 = all that fits in the model's positions)")
      ->capture_default_str();
  cmd->add_flag("--diff", o->diff, "Print a unified diff instead of the file");
  cmd->add_option("--refine", o->refine, "Refine rounds after the fill")->capture_default_str();
  cmd->add_option("--refine-tokens", o->refine_tokens,
                  "Tokens remasked per refine round (0 = a quarter of the span, at least 1)")
      ->capture_default_str();
  add_masked_span_flags(cmd, o->params, o->denoise);
  cmd->add_option("--dtype", o->dtype, kDtypeHelp)->capture_default_str();
  add_backend_options(cmd);
  cmd->add_option("-t,--threads", o->threads, "Threads (0 = all cores)")->capture_default_str();
  cmd->add_flag("--json", o->json,
                "Print one JSON object: {text, span, span_ids, old_span, diff, tokens, forwards, refine: "
                "[{remasked, changed}]}");
  cmd->add_flag("-q,--quiet", o->quiet, "No status lines on stderr");
  add_hub_options(cmd);
  cmd->callback([o] {
    o->model = resolve_model(o->model, o->quiet || o->json);
    run_rewrite(*o);
  });
}

RegisterCommand registration("rewrite", setup);

}  // namespace
}  // namespace dllm::cli
