// `dllm generate`: denoise a completion for one or more prompts.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "command.h"
#include "common.h"
#include "core/error.h"
#include "denoise_flags.h"
#include "io/json_file.h"
#include "model/model_tokenizer.h"
#include "server/terminal_view.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "uniform_state_flags.h"

namespace dllm::cli {
namespace {

struct GenerateOptions {
  std::string model = default_model_path();
  std::string tokenizer;  // empty: the model's own
  std::vector<std::string> prompt_ids;
  std::vector<std::string> prompts;
  bool chat = false;
  std::string system;
  std::string dtype = "auto";
  int threads = 0;
  bool json = false;
  bool quiet = false;
  bool visual = false;
  std::vector<std::string> stop;  // autoregressive models: stop strings
  std::string draft;              // a diffusion drafter for speculative decoding
  DraftParams draft_params;
  GenerateParams params;
  DenoiseFlags denoise;
  UniformStateFlags uniform_state;
  CLI::App* command = nullptr;  // whether --gen-length / --max-new-tokens was given (DiffusionGemma)
};

// The answer as text: up to the first EOS / EOT / end-of-generation id (a diffusion canvas is padded with
// them), special tokens skipped.
std::string answer_text(const Tokenizer& tok, const ModelInfo& info, const std::vector<int32_t>& ids) {
  auto ends = [&](int32_t id) {
    return id == info.eos_id || id == info.eot_id ||
           std::find(info.eog_ids.begin(), info.eog_ids.end(), id) != info.eog_ids.end();
  };
  size_t end = 0;
  while (end < ids.size() && !ends(ids[end])) ++end;
  return tok.decode(std::span<const int32_t>(ids.data(), end), /*skip_special_tokens=*/true);
}

// `text` cut before the first of the stop strings it contains; *stopped says whether there was one.
std::string cut_at_stop(std::string text, const std::vector<std::string>& stops, bool* stopped) {
  size_t at = std::string::npos;
  for (const auto& s : stops)
    if (!s.empty()) at = std::min(at, text.find(s));
  if (stopped) *stopped = at != std::string::npos;
  if (at != std::string::npos) text.resize(at);
  return text;
}

// How much of a growing text can be printed now: not a trailing incomplete UTF-8 sequence, nor a tail that
// may be the start of a stop string.
size_t printable_prefix(const std::string& text, const std::vector<std::string>& stops) {
  size_t safe = text.size();
  size_t lead = safe;
  while (lead > 0 && (static_cast<unsigned char>(text[lead - 1]) & 0xC0) == 0x80) --lead;
  if (lead > 0) {
    const auto c = static_cast<unsigned char>(text[lead - 1]);
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (safe - (lead - 1) < need) safe = lead - 1;
  }
  for (const auto& s : stops)
    for (size_t k = s.empty() ? 0 : std::min(s.size() - 1, safe); k > 0; --k)
      if (text.compare(safe - k, k, s, 0, k) == 0) {
        safe -= k;
        break;
      }
  return safe;
}

// Text prompts -> ids with the model's tokenizer, through the chat template when there is one (--chat).
std::vector<int32_t> encode_prompt(const Tokenizer& tok, const ChatTemplate* chat, const GenerateOptions& o,
                                   const std::string& text) {
  if (!chat) return tok.encode(text, /*add_special_tokens=*/true);
  nlohmann::json messages = nlohmann::json::array();
  if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  messages.push_back({{"role", "user"}, {"content", text}});
  // The rendered template already holds its special tokens (BOS, role markers): no post-processor on top.
  return tok.encode(chat->render(messages, /*add_generation_prompt=*/true), false);
}

void run_generate(const GenerateOptions& o) {
  if (o.prompt_ids.empty() == o.prompts.empty())
    fail(
        "give the prompt either as text (-p TEXT) or as token ids (--prompt-ids IDS), one flag per batch "
        "row");
  if (o.chat && o.prompts.empty()) fail("--chat needs a text prompt (-p TEXT)");
  const std::string tokenizer = o.tokenizer.empty() ? o.model : o.tokenizer;
  // The tokenizer only where text is: a model whose own tokenizer cannot be built still runs on --prompt-ids
  // (one warning); a text prompt fails with the same message. A --tokenizer that cannot be built is an error.
  ModelTokenizer mt;
  if (!o.tokenizer.empty() && has_model_tokenizer(o.tokenizer))
    mt.tokenizer = load_model_tokenizer(o.tokenizer, o.chat ? &mt.gguf_chat : nullptr);
  else if (o.tokenizer.empty())
    mt = try_load_model_tokenizer(o.model, o.chat);
  if (!o.prompts.empty() && !mt.tokenizer) {
    if (!mt.error.empty()) fail(mt.error);
    fail(tokenizer, ": no tokenizer.json, so text prompts are not possible; use --prompt-ids or --tokenizer");
  }
  if (!mt.error.empty())
    std::fprintf(stderr, "dllm: warning: %s; only token ids (--prompt-ids) can be used\n", mt.error.c_str());
  const bool have_tokenizer = mt.tokenizer.has_value();
  const Tokenizer tok = have_tokenizer ? *mt.tokenizer : Tokenizer();
  // --chat: the template stored in a GGUF tokenizer (read with it), else tokenizer_config.json beside it.
  std::optional<ChatTemplate> chat = std::move(mt.gguf_chat);
  if (o.chat && !chat) chat = ChatTemplate::load(tokenizer);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& text : o.prompt_ids) prompts.push_back(parse_ids(text));
  for (const auto& text : o.prompts) prompts.push_back(encode_prompt(tok, chat ? &*chat : nullptr, o, text));
  GenerateParams params = o.params;
  apply_denoise_flags(o.denoise, params);

  auto model = load_model_or_throw(o.model, parse_dtype(o.dtype), o.threads, o.quiet || o.json);
  const bool autoregressive = model->info().autoregressive;
  const bool canvas_model = model->canvas_decoder() != nullptr;
  if (canvas_model) {
    apply_uniform_state_flags(o.uniform_state, params);
    // The plain flag over a --generation-config file's value, as the other plain flags.
    if (o.command->count("--gen-length") + o.command->count("--max-new-tokens") > 0)
      params.uniform_state.max_new_tokens = params.gen_length;
  } else if (uniform_state_flags_given(o.uniform_state)) {
    fail(
        "--generation-config, --random-tape, --canvas-ids and the other DiffusionGemma sampling flags apply "
        "to "
        "a uniform-state canvas model (diffusion_gemma); ",
        model->info().architecture, " is not one");
  }
  if (!o.stop.empty() && !autoregressive)
    fail("--stop applies to autoregressive models (a diffusion canvas is not written left to right)");
  if (!o.stop.empty() && !have_tokenizer) fail("--stop needs the model's tokenizer to read the text");
  if (autoregressive && o.visual) fail("--visual shows a denoising canvas; this model is autoregressive");
  const bool progress = !o.json && !o.quiet && stderr_is_terminal();
  const int64_t steps = canvas_model       ? 0
                        : params.steps > 0 ? params.steps
                                           : params.gen_length;  // 0: not known ahead
  StepCallback on_step;
  if (progress)
    on_step = [&](const StepEvent& ev) {
      if (steps > 0)
        std::fprintf(stderr, "\r%s: forward %lld / %lld", autoregressive ? "decoding" : "denoising",
                     static_cast<long long>(ev.forwards), static_cast<long long>(steps));
      else
        std::fprintf(stderr, "\rdenoising: canvas %lld, step %lld", static_cast<long long>(ev.block + 1),
                     static_cast<long long>(ev.step + 1));
      return true;
    };
  // Autoregressive models: the text streams to stdout as tokens arrive, one row at a time; a --stop string
  // ends its row and is not printed.
  const bool stream = autoregressive && have_tokenizer && !o.json;
  size_t printed = 0;  // bytes of the current row's text already on stdout
  if (autoregressive && have_tokenizer && (stream || !o.stop.empty()))
    on_step = [&](const StepEvent& ev) {
      bool stopped = false;
      const std::string text =
          cut_at_stop(answer_text(tok, model->info(), ev.canvas->at(0)), o.stop, &stopped);
      if (stream) {
        const size_t safe = stopped ? text.size() : printable_prefix(text, o.stop);
        if (safe > printed) {
          std::fwrite(text.data() + printed, 1, safe - printed, stdout);
          std::fflush(stdout);
          printed = safe;
        }
      }
      return !stopped;
    };
  // --visual: the canvas redrawn in place each step, then the final text (plain output when not a terminal).
  std::optional<server::TextCodec> codec;
  std::optional<server::TerminalView> view;
  if (o.visual && !o.json && stdout_is_terminal()) {
    codec = server::TextCodec::load_if_present(tokenizer, model->info());
    view.emplace(*codec, stdout);
    on_step = [&](const StepEvent& ev) {
      view->draw(ev);
      return true;
    };
  }
  // --draft: the diffusion drafter, after checking that it reads the same ids as the same text.
  std::shared_ptr<Model> drafter;
  SpeculativeStats spec;
  if (!o.draft.empty()) {
    if (!autoregressive)
      fail("--draft needs an autoregressive model to verify the drafts (-m qwen2/qwen3/llama)");
    drafter = load_model_or_throw(o.draft, parse_dtype(o.dtype), o.threads, o.quiet || o.json);
    check_same_vocabulary(o.model, o.draft);
  }
  // Autoregressive models run one row at a time, so that a --stop string ends its own row only; a streamed
  // row ends with what was held back (a partial UTF-8 sequence, a prefix of a stop string) and a newline.
  GenerateResult result;
  if (autoregressive) {
    for (const auto& prompt : prompts) {
      printed = 0;
      SpeculativeStats row_stats;
      auto one = drafter ? generate_speculative(*model, *drafter, {prompt}, params, o.draft_params, on_step,
                                                &row_stats)
                               .value()
                         : generate(*model, {prompt}, params, on_step).value();
      spec.rounds += row_stats.rounds;
      spec.drafted += row_stats.drafted;
      spec.accepted += row_stats.accepted;
      spec.draft_forwards += row_stats.draft_forwards;
      spec.draft_positions += row_stats.draft_positions;
      spec.verify_forwards += row_stats.verify_forwards;
      spec.draft_seconds += row_stats.draft_seconds;
      spec.verify_seconds += row_stats.verify_seconds;
      result.outputs.push_back(one.outputs.at(0));
      result.forwards += one.forwards;
      result.seconds += one.seconds;
      if (stream) {
        const std::string text =
            cut_at_stop(answer_text(tok, model->info(), one.outputs[0]), o.stop, nullptr);
        std::printf("%s\n", text.substr(std::min(printed, text.size())).c_str());
        std::fflush(stdout);
      }
    }
  } else {
    result = generate(*model, prompts, params, on_step).value();
  }
  if (progress && !view && !stream) std::fprintf(stderr, "\r\033[K");
  if (view) view->erase();
  double tokens = static_cast<double>(prompts.size() * params.gen_length);
  if (autoregressive) {  // what was decoded, up to each row's stop
    tokens = 0;
    for (const auto& row : result.outputs) tokens += static_cast<double>(row.size());
  }
  if (canvas_model) {  // what was generated before the pad that follows EOS
    tokens = 0;
    const int32_t pad =
        params.uniform_state.pad_id.value_or(*model->canvas_decoder()->generation_defaults().pad_id);
    for (const auto& row : result.outputs)
      tokens +=
          static_cast<double>(std::count_if(row.begin(), row.end(), [&](int32_t t) { return t != pad; }));
  }
  const double tps = result.seconds > 0 ? tokens / result.seconds : 0;
  if (o.json) {
    nlohmann::json out = {{"outputs", result.outputs},
                          {"forwards", result.forwards},
                          {"seconds", result.seconds},
                          {"tokens_per_second", tps},
                          {"precision", model->info().precision_by_type}};
    if (!result.canvases.empty()) out["canvas"] = result.canvases;  // block-diffusion loops
    if (canvas_model) {
      out["tokens_per_forward"] = result.tokens_per_forward;
      out["num_canvases"] = result.canvases_run;
    }
    if (drafter)
      out["speculative"] = {{"draft_tokens", o.draft_params.tokens},
                            {"draft_steps", o.draft_params.steps},
                            {"draft_cache", o.draft_params.cache ? "prefix" : "none"},
                            {"draft_positions", spec.draft_positions},
                            {"rounds", spec.rounds},
                            {"drafted", spec.drafted},
                            {"accepted", spec.accepted},
                            {"mean_accepted", spec.mean_accepted()},
                            {"draft_forwards", spec.draft_forwards},
                            {"verify_forwards", spec.verify_forwards},
                            {"draft_seconds", spec.draft_seconds},
                            {"verify_seconds", spec.verify_seconds}};
    if (have_tokenizer) {
      out["texts"] = nlohmann::json::array();
      for (const auto& row : result.outputs) {
        out["texts"].push_back(cut_at_stop(answer_text(tok, model->info(), row), o.stop, nullptr));
      }
    }
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  for (const auto& row : result.outputs) {
    if (stream) break;  // already printed as it was decoded
    if (view) {
      std::printf("%s\n", server::PrefixStream(*codec, {}).advance(row, /*final=*/true).c_str());
      continue;
    }
    if (have_tokenizer) {
      std::printf("%s\n", answer_text(tok, model->info(), row).c_str());
      continue;
    }
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) line += (i ? " " : "") + std::to_string(row[i]);
    std::printf("%s\n", line.c_str());
  }
  if (!o.quiet && drafter)
    std::fprintf(
        stderr,
        "dllm: speculative: %lld rounds of %lld drafts in %lld steps, %.2f accepted per round (%.0f%%); "
        "drafter %.3f s (%lld forwards), verifier %.3f s (%lld forwards)\n",
        static_cast<long long>(spec.rounds), static_cast<long long>(o.draft_params.tokens),
        static_cast<long long>(o.draft_params.steps), spec.mean_accepted(),
        spec.drafted ? 100.0 * spec.accepted / spec.drafted : 0.0, spec.draft_seconds,
        static_cast<long long>(spec.draft_forwards), spec.verify_seconds,
        static_cast<long long>(spec.verify_forwards));
  if (!o.quiet)
    std::fprintf(stderr, "dllm: %lld forwards, %.3f s, %.1f tokens/s\n",
                 static_cast<long long>(result.forwards), result.seconds, tps);
}

void setup(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  auto* cmd =
      app.add_subcommand("generate",
                         "Generate a completion: denoise a masked canvas (diffusion models) or decode "
                         "token by token (autoregressive models: qwen2, qwen3, llama)");
  cmd->add_option(
         "-m,--model", o->model,
         "Model directory (Hugging Face layout), .gguf file, or Hugging Face id org/name[@revision][:quant] "
         "(from the cache, downloaded into it when missing: docs/hub.md)")
      ->capture_default_str();
  cmd->add_option("--tokenizer", o->tokenizer,
                  "tokenizer.json, or a directory with it (+ tokenizer_config.json for --chat), when not the "
                  "model's own");
  cmd->add_option("-p,--prompt", o->prompts,
                  "Prompt text, encoded with the model's tokenizer.json; repeat for a batch");
  cmd->add_flag("--chat", o->chat, "Wrap the prompt in the model's chat template (tokenizer_config.json)");
  cmd->add_option("--system", o->system, "With --chat: a system message");
  cmd->add_option(
      "--prompt-ids", o->prompt_ids,
      "Prompt token ids, comma separated; repeat the flag for a batch (rows are left-padded to equal "
      "length with the pad id, as the reference does)");
  o->command = cmd;
  cmd->add_option("--gen-length,--max-tokens", o->params.gen_length,
                  "Number of tokens to generate (autoregressive models: the most; they stop "
                  "at an end-of-generation id; DiffusionGemma: its max_new_tokens, whole canvases)")
      ->capture_default_str();
  cmd->add_option("--block-length", o->params.block_length,
                  "Semi-autoregressive block length (0 = gen-length: one block; block-diffusion models: the "
                  "model's block size)")
      ->capture_default_str();
  cmd->add_option(
         "--steps", o->params.steps,
         "Denoising steps in total, split evenly over blocks (0 = gen-length); block-diffusion models: "
         "steps per block (0 = the loop's default: LLaDA2 32, SDAR block-length)")
      ->capture_default_str();
  cmd->add_option(
         "--temperature", o->params.temperature,
         "Sampling temperature (0 = argmax; LLaDA: Gumbel-max, block-diffusion models: filtered softmax)")
      ->capture_default_str();
  cmd->add_option("--cfg-scale", o->params.cfg_scale, "Classifier-free guidance scale (0 = off)")
      ->capture_default_str();
  cmd->add_option("--seed", o->params.seed, "Random seed for sampling and random remasking")
      ->capture_default_str();
  cmd->add_flag(
      "--stop-at-eos", o->params.stop_at_eos,
      "Stop a row once EOS is committed with nothing masked before it (fills the rest with EOS; not "
      "the reference behaviour, which always runs every step)");
  cmd->add_flag("--logits-eos-inf", o->params.logits_eos_inf, "Never predict EOS (LLaDA logits_eos_inf)");
  cmd->add_flag("--confidence-eos-eot-inf", o->params.confidence_eos_eot_inf,
                "Exclude EOT (and EOS at temperature 0) from the confidence (LLaDA confidence_eos_eot_inf)");
  add_denoise_flags(cmd, o->params, o->denoise);
  add_uniform_state_flags(cmd, o->uniform_state);
  add_weights_option(cmd);
  cmd->add_option("--dtype", o->dtype, kDtypeHelp)->capture_default_str();
  add_backend_options(cmd);
  cmd->add_option("-t,--threads", o->threads, "Threads (0 = all cores)")->capture_default_str();
  cmd->add_flag(
      "--json", o->json,
      "Print one JSON object: {outputs: [[ids] per row], forwards, seconds, tokens_per_second, precision: "
      "{stored type: what it runs as}} "
      "(block-diffusion "
      "models: also canvas, each row's whole final canvas, prompt and mask ids included)");
  cmd->add_option(
      "--stop", o->stop,
      "Autoregressive models: end the answer before this text (repeatable); printed text stops there");
  cmd->add_option(
      "--draft", o->draft,
      "Speculative decoding: a diffusion model (same tokenizer) drafts tokens that this "
      "autoregressive model verifies in one forward; greedy output is unchanged (docs/hybrid.md)");
  add_draft_options(cmd, o->draft_params);
  cmd->add_flag("-q,--quiet", o->quiet, "No status lines on stderr");
  cmd->add_flag(
      "--visual", o->visual,
      "Redraw the canvas in place after each step (masks dimmed, new tokens highlighted), then print the "
      "final text; plain output when stdout is not a terminal");
  add_hub_options(cmd);
  cmd->callback([o] {
    o->model = resolve_model(o->model, o->quiet || o->json);  // a Hugging Face id -> its files in the cache
    if (!o->draft.empty()) o->draft = resolve_model(o->draft, o->quiet || o->json);
    run_generate(*o);
  });
}

RegisterCommand registration("generate", setup);

}  // namespace
}  // namespace dllm::cli
