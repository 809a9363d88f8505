// `dllm infill`: fill the placeholders of a text (`<|mask|>`, `<|mask:N|>`) natively: the canvas is prefix +
// N mask ids + suffix (any number of spans), every position attends to both sides, only the masked spans are
// denoised. docs/denoising.md "Infilling".
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "common.h"
#include "core/error.h"
#include "core/file.h"
#include "denoise/infill_template.h"
#include "denoise_flags.h"
#include "io/json_file.h"
#include "model/model_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace dllm::cli {
namespace {

struct InfillOptions {
  std::string model = default_model_path();
  std::string tokenizer;  // empty: the model's own
  std::string text;
  int64_t default_length = kDefaultInfillLength;
  bool bos = false;
  std::string dtype = "auto";
  int threads = 0;
  bool json = false;
  bool quiet = false;
  GenerateParams params;
  DenoiseFlags denoise;
};

void run_infill(const InfillOptions& o) {
  const std::string tokenizer = o.tokenizer.empty() ? o.model : o.tokenizer;
  if (!has_model_tokenizer(tokenizer))
    fail(tokenizer, ": no tokenizer.json; infill needs a tokenizer (--tokenizer)");
  // --text is a file when such a file exists, else the text itself.
  const std::string text = file_exists(o.text) ? read_whole_file(o.text) : o.text;
  const InfillTemplate tmpl = parse_infill_template(text, o.default_length);
  if (tmpl.lengths.empty())
    fail("--text has no placeholder: mark the spans to fill with <|mask|> (", o.default_length,
         " tokens) or <|mask:N|> (N tokens)");
  const Tokenizer tok = load_model_tokenizer(tokenizer);
  auto model = load_model_or_throw(o.model, parse_dtype(o.dtype), o.threads, o.quiet || o.json);
  const ModelInfo& mi = model->info();
  std::vector<int32_t> bos;
  if (o.bos) {
    if (mi.bos_id < 0) fail("--bos: the model has no bos id");
    bos.push_back(mi.bos_id);
  }
  const InfillCanvas canvas = build_infill_canvas(tok, tmpl, mi.mask_id, bos);
  GenerateParams params = o.params;
  apply_denoise_flags(o.denoise, params);
  const auto result = infill(*model, {canvas.ids}, params).value();
  const std::vector<int32_t>& filled = result.outputs[0];
  const int64_t n = static_cast<int64_t>(std::count(canvas.ids.begin(), canvas.ids.end(), mi.mask_id));
  const double tps = result.seconds > 0 ? static_cast<double>(n) / result.seconds : 0;
  const std::string out_text = tok.decode(filled, /*skip_special_tokens=*/true);
  if (o.json) {
    nlohmann::json spans = nlohmann::json::array();
    for (size_t k = 0; k < canvas.span_begin.size(); ++k) {
      const auto b = filled.begin() + canvas.span_begin[k];
      std::vector<int32_t> ids(b, b + canvas.span_length[k]);
      spans.push_back({{"begin", canvas.span_begin[k]},
                       {"length", canvas.span_length[k]},
                       {"ids", ids},
                       {"text", tok.decode(ids, /*skip_special_tokens=*/true)}});
    }
    const nlohmann::json out = {{"text", out_text},
                                {"ids", filled},
                                {"canvas", canvas.ids},
                                {"spans", spans},
                                {"forwards", result.forwards},
                                {"seconds", result.seconds},
                                {"tokens_per_second", tps}};
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("%s\n", out_text.c_str());
  if (!o.quiet)
    std::fprintf(stderr, "dllm: filled %lld tokens in %zu span(s): %lld forwards, %.3f s, %.1f tokens/s\n",
                 static_cast<long long>(n), canvas.span_begin.size(), static_cast<long long>(result.forwards),
                 result.seconds, tps);
}

void setup(CLI::App& app) {
  auto o = std::make_shared<InfillOptions>();
  auto* cmd = app.add_subcommand(
      "infill",
      "Fill the placeholders of a text: <|mask|> (--default-length tokens, default 16) or <|mask:N|> (N "
      "tokens), "
      "any number of them. The canvas is the text's tokens with N mask ids per placeholder; the model sees "
      "both "
      "sides of every span (bidirectional attention) and only the masked positions are denoised. Blocks, "
      "steps, "
      "threshold/factor and caches apply to the masked positions taken left to right. Prints the filled text "
      "(special tokens such as EOS, which a span may be filled with, are not printed)");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "tokenizer.json, or a directory with it, when not the model's own");
  cmd->add_option("-m,--model", o->model,
                  "Model directory (Hugging Face layout, with tokenizer.json) or .gguf file")
      ->capture_default_str();
  cmd->add_option("--text", o->text, "The text with placeholders, or a file holding it")->required();
  cmd->add_option("--default-length", o->default_length, "Tokens per <|mask|> placeholder")
      ->capture_default_str();
  cmd->add_flag("--bos", o->bos, "Put the model's BOS id first (the demo model was trained without)");
  add_masked_span_flags(cmd, o->params, o->denoise);
  cmd->add_option("--dtype", o->dtype, kDtypeHelp)->capture_default_str();
  add_backend_options(cmd);
  cmd->add_option("-t,--threads", o->threads, "Threads (0 = all cores)")->capture_default_str();
  cmd->add_flag(
      "--json", o->json,
      "Print one JSON object: {text, ids (filled canvas), canvas (with mask ids), spans: [{begin, length, "
      "ids, text}], forwards, seconds, tokens_per_second}");
  cmd->add_flag("-q,--quiet", o->quiet, "No status lines on stderr");
  add_hub_options(cmd);
  cmd->callback([o] {
    o->model = resolve_model(o->model, o->quiet || o->json);
    run_infill(*o);
  });
}

RegisterCommand registration("infill", setup);

}  // namespace
}  // namespace dllm::cli
