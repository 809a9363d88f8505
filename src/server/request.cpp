#include "server/request.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "ar/ar_generate.h"
#include "denoise/infill_template.h"
#include "denoise/strategy_names.h"
#include "server/router.h"

namespace dllm::server {
namespace {

using nlohmann::json;

struct FieldError {
  std::string param, message;
  int status = 400;
};

[[noreturn]] void bad(const std::string& param, const std::string& message, int status = 400) {
  throw FieldError{param, message, status};
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_float:
      return "a number";
    default:
      return "an integer";
  }
}

// A field that is absent or null reads as "not given".
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<int64_t> get_int(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_integer()) {
    x = v->get<int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e15) {
    x = static_cast<int64_t>(v->get<double>());
  } else {
    bad(name, std::string("'") + name + "' must be an integer, got " + type_name(*v));
  }
  if (x < lo || x > hi)
    bad(name, std::string("'") + name + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                  "], got " + std::to_string(x));
  return x;
}

std::optional<double> get_number(const json& body, const char* name, double lo, double hi,
                                 bool lo_open = false) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(name, std::string("'") + name + "' must be a number, got " + type_name(*v));
  const double x = v->get<double>();
  if (!(lo_open ? x > lo : x >= lo) || !(x <= hi) || !std::isfinite(x))
    bad(name, std::string("'") + name + "' must be in " + (lo_open ? "(" : "[") + json(lo).dump() + ", " +
                  json(hi).dump() + "], got " + v->dump());
  return x;
}

std::optional<bool> get_bool(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(name, std::string("'") + name + "' must be a boolean, got " + type_name(*v));
  return v->get<bool>();
}

std::optional<std::string> get_string(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad(name, std::string("'") + name + "' must be a string, got " + type_name(*v));
  return v->get<std::string>();
}

// Fields of the OpenAI API this engine has no equivalent for: accepted only at their "off" value.
void reject_unsupported(const json& body, Endpoint endpoint) {
  auto off = [&](const char* name, auto&& is_off) {
    const json* v = field(body, name);
    if (v && !is_off(*v))
      bad(name,
          std::string("'") + name + "' is not supported by this server (diffusion models produce no " +
              "per-token log-probabilities, penalties, tools or structured output, and its autoregressive " +
              "models offer the same fields); remove it");
  };
  auto zero = [](const json& v) { return v.is_number() && v.get<double>() == 0; };
  auto falsy = [](const json& v) { return v.is_boolean() && !v.get<bool>(); };
  auto empty = [](const json& v) { return (v.is_object() || v.is_array() || v.is_string()) && v.empty(); };
  off("logprobs", [&](const json& v) { return falsy(v) || zero(v); });
  off("top_logprobs", zero);
  off("logit_bias", empty);
  off("presence_penalty", zero);
  off("frequency_penalty", zero);
  off("echo", falsy);
  if (endpoint == Endpoint::kChat) off("suffix", empty);  // completions: infill (parse_suffix)
  off("tools", empty);
  off("functions", empty);
  off("tool_choice", [](const json& v) { return v == "none" || v == "auto"; });
  off("parallel_tool_calls", [](const json&) { return true; });
  off("response_format", [](const json& v) { return v.is_object() && v.value("type", "") == "text"; });
  off("best_of", [](const json& v) { return v.is_number() && v.get<double>() <= 1; });
  off("modalities", [](const json& v) { return v == json::array({"text"}); });
}

// The request fields that take strategy words (unmask, alg, remasking, schedule, cache).
std::vector<std::string> strategy_keys() {
  std::vector<std::string> keys;
  for (auto k : unmask_axis().keys) keys.emplace_back(k);
  for (auto k : transfer_axis().keys) keys.emplace_back(k);
  for (auto k : sampler_axis().keys) keys.emplace_back(k);
  for (auto k : cache_axis().keys) keys.emplace_back(k);
  return keys;
}

const std::set<std::string>& known_fields(Endpoint e) {
  static const std::set<std::string> common = {
      // OpenAI
      "model", "max_tokens", "temperature", "top_p", "stop", "n", "seed", "stream", "stream_options", "user",
      "metadata", "store", "service_tier", "logprobs", "top_logprobs", "logit_bias", "presence_penalty",
      "frequency_penalty", "best_of", "echo", "suffix", "tools", "functions", "tool_choice",
      "parallel_tool_calls", "response_format", "modalities",
      // dLLM
      "steps", "block_length", "threshold", "factor", "cfg_scale", "top_k", "alg_temp", "diffusing",
      "mask_placeholder", "stop_at_eos", "mask_id", "eos_id",
      // block-diffusion loops (LLaDA2.x, SDAR)
      "block_loop", "minimal_topk", "eos_early_stop", "editing_threshold", "max_post_steps",
      "num_to_transfer", "stop_ids",
      // uniform-state canvas models (DiffusionGemma)
      "max_denoising_steps", "t_min", "t_max", "entropy_bound", "stability_threshold",
      "confidence_threshold"};
  static const std::set<std::string> completions = [] {
    auto s = common;
    for (const auto& key : strategy_keys()) s.insert(key);
    s.insert("prompt");
    return s;
  }();
  static const std::set<std::string> chat = [] {
    auto s = common;
    for (const auto& key : strategy_keys()) s.insert(key);
    s.insert({"messages", "max_completion_tokens"});
    return s;
  }();
  static const std::set<std::string> canvas = [] {
    auto s = common;
    for (const auto& key : strategy_keys()) s.insert(key);
    s.insert({"text", "spans", "mode", "refine", "refine_tokens"});
    return s;
  }();
  return e == Endpoint::kChat ? chat : e == Endpoint::kCanvas ? canvas : completions;
}

std::vector<int32_t> completion_prompt(const json& body, const TextCodec& codec) {
  const json* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required");
  auto ids_of = [&](const json& arr) {
    std::vector<int32_t> ids;
    for (const auto& x : arr) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
        bad("prompt", "'prompt' as an array of token ids must hold non-negative integers, got " + x.dump());
      ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
    }
    return ids;
  };
  auto encode = [&](const std::string& text) {
    try {
      return codec.encode(text, /*add_special_tokens=*/true);
    } catch (const std::exception& e) {
      bad("prompt", std::string("'prompt': ") + e.what());
    }
  };
  if (p->is_string()) return encode(p->get<std::string>());
  if (p->is_array()) {
    if (p->empty()) bad("prompt", "'prompt' must not be empty");
    if ((*p)[0].is_number()) return ids_of(*p);
    if (p->size() > 1)
      bad("prompt", "'prompt' holds " + std::to_string(p->size()) +
                        " prompts; send one per request (the server batches concurrent requests)");
    if ((*p)[0].is_string()) return encode((*p)[0].get<std::string>());
    if ((*p)[0].is_array()) return ids_of((*p)[0]);
  }
  bad("prompt", std::string("'prompt' must be a string or an array of token ids, got ") + type_name(*p));
}

std::vector<int32_t> chat_prompt(const json& body, const TextCodec& codec) {
  const json* m = field(body, "messages");
  if (!m) bad("messages", "'messages' is required");
  if (!m->is_array()) bad("messages", std::string("'messages' must be an array, got ") + type_name(*m));
  if (m->empty()) bad("messages", "'messages' must not be empty");
  json messages = json::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) bad(at, "'" + at + "' must be an object, got " + type_name(msg));
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string()) bad(at + ".role", "'" + at + ".role' must be a string");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "developer")
      bad(at + ".role",
          "'" + at + ".role' must be one of system, developer, user, assistant; got '" + r + "'");
    auto content = msg.find("content");
    std::string text;
    if (content == msg.end() || content->is_null()) {
      bad(at + ".content", "'" + at + ".content' is required");
    } else if (content->is_string()) {
      text = content->get<std::string>();
    } else if (content->is_array()) {
      for (const auto& part : *content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string())
          bad(at + ".content", "'" + at + ".content' parts must be {\"type\": \"text\", \"text\": string}");
        text += part["text"].get<std::string>();
      }
    } else {
      bad(at + ".content",
          "'" + at + ".content' must be a string or an array of text parts, got " + type_name(*content));
    }
    messages.push_back({{"role", r == "developer" ? "system" : r}, {"content", text}});
  }
  if (!codec.chat_template())
    bad("messages",
        !codec.tokenizer_error().empty() ? codec.tokenizer_error()
        : codec.has_tokenizer()
            ? "this model has no chat template (tokenizer_config.json); use /v1/completions"
            : "this model has no tokenizer.json and no chat template; use /v1/completions with token ids");
  std::string text;
  try {
    text = codec.chat_template()->render(messages, /*add_generation_prompt=*/true);
  } catch (const std::exception& e) {
    bad("messages", std::string("the chat template rejected 'messages': ") + e.what());
  }
  // The rendered template carries its own special tokens (BOS ...), as transformers' apply_chat_template.
  return codec.encode(text, /*add_special_tokens=*/false);
}

// An array of token ids (empty: never stop early, the SDAR reference's default None); null / absent: the
// model's EOS and EOT (autoregressive models: its end-of-generation ids).
void parse_stop_ids(const json& body, const ModelInfo& info, GenerateParams& p) {
  const json* v = field(body, "stop_ids");
  if (!v) return;
  if (!v->is_array())
    bad("stop_ids", std::string("'stop_ids' must be an array of token ids, got ") + type_name(*v));
  std::vector<int32_t> ids;
  for (const auto& x : *v) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= info.vocab_size)
      bad("stop_ids",
          "'stop_ids' must hold token ids in [0, " + std::to_string(info.vocab_size) + "), got " + x.dump());
    ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  p.stop_ids = std::move(ids);
}

// The block-diffusion loops' knobs, the names of GenerateParams / the CLI flags (--block-loop, ...).
void parse_block_fields(const json& body, const ModelInfo& info, GenerateParams& p) {
  static const char* const kBlockFields[] = {"block_loop",        "minimal_topk",   "eos_early_stop",
                                             "editing_threshold", "max_post_steps", "num_to_transfer",
                                             "stop_ids"};
  if (info.block_size <= 0) {
    for (const char* name : kBlockFields)
      if (field(body, name))
        bad(name, std::string("'") + name + "' applies to block-diffusion models (LLaDA2.x, SDAR) only; " +
                      "this server's model is " + info.architecture);
    return;
  }
  if (auto v = get_string(body, "block_loop")) {
    const auto loop = block_loop_words().find(*v);
    if (!loop) bad("block_loop", "'block_loop': '" + *v + "' is not one of " + block_loop_words().accepted());
    p.block_loop = *loop;
  }
  if (auto v = get_int(body, "minimal_topk", 1, 1 << 20)) p.minimal_topk = *v;
  if (auto v = get_bool(body, "eos_early_stop")) p.eos_early_stop = *v;
  if (auto v = get_number(body, "editing_threshold", 0, 1)) p.editing_threshold = *v;
  if (auto v = get_int(body, "max_post_steps", 0, 1 << 20)) p.max_post_steps = *v;
  if (auto v = get_int(body, "num_to_transfer", 1, 1 << 20)) p.num_to_transfer = *v;
  parse_stop_ids(body, info, p);
}

void parse_dllm_fields(const json& body, const ModelInfo& info, GenerateParams& p) {
  for (const std::string& name : uniform_state_fields())
    if (field(body, name.c_str()))
      bad(name, "'" + name +
                    "' applies to uniform-state canvas models (DiffusionGemma) only; this server's " +
                    "model is " + info.architecture);
  if (auto v = get_int(body, "steps", 1, 1 << 20)) p.steps = *v;
  if (auto v = get_int(body, "block_length", 1, 1 << 20)) p.block_length = *v;
  // The strategy axes: the words of src/denoise/strategy_names.h, as the CLI flags take them.
  StrategyChoice choice;
  for (const std::string& key : strategy_keys())
    if (auto v = get_string(body, key.c_str())) choice.words[key] = *v;
  choice.threshold = get_number(body, "threshold", 0, 1, /*lo_open=*/true);
  choice.factor = get_number(body, "factor", 0, 1e6, /*lo_open=*/true);
  try {
    apply_strategy(choice, p);
  } catch (const StrategyError& e) {
    bad(e.key, "'" + e.key + "': " + e.what());
  }
  if (auto v = get_number(body, "cfg_scale", 0, 100)) p.cfg_scale = *v;
  if (auto v = get_int(body, "top_k", 0, 1 << 30)) {
    if (*v > 0 && info.architecture != "dream")
      bad("top_k",
          "'top_k' is not supported for " + info.architecture + " models (its sampler has no top-k filter)");
    p.top_k = *v;
  }
  if (auto v = get_number(body, "alg_temp", 0, 100)) p.alg_temp = *v;
  if (auto v = get_bool(body, "stop_at_eos")) {
    if (*v && info.block_size > 0)
      bad("stop_at_eos", "'stop_at_eos' is not offered for block-diffusion models (" + info.architecture +
                             "); use 'eos_early_stop' (LLaDA2) or 'stop_ids' (SDAR)");
    p.stop_at_eos = *v;
  }
  const int64_t vocab = std::max<int64_t>(info.vocab_size, 1);
  if (auto v = get_int(body, "mask_id", 0, vocab - 1)) p.mask_id = static_cast<int32_t>(*v);
  if (auto v = get_int(body, "eos_id", 0, vocab - 1)) p.eos_id = static_cast<int32_t>(*v);
  parse_block_fields(body, info, p);
}

// Autoregressive models: every diffusion-only field is a 400 by name (checked before any other field).
void reject_diffusion_fields(const json& body, const ModelInfo& info, const std::string& model_id) {
  const auto& d = diffusion_only_fields();
  for (const auto& [key, value] : body.items())
    if (!value.is_null() && std::find(d.begin(), d.end(), key) != d.end())
      bad(key, "'" + key + "' applies to diffusion models only; '" + model_id +
                   "' is an autoregressive model (" + info.architecture +
                   "): remove it, or name a diffusion model (or \"auto\")");
}

// A uniform-state canvas model (DiffusionGemma): the fields its sampler has no counterpart for (the masked
// diffusion ones, temperature, top_k, stop_ids, a non-empty suffix) are a 400 naming the field; its own set
// params.uniform_state over the model's generation_config.json (policy.defaults).
void parse_uniform_state_fields(const json& body, const ModelInfo& info, const std::string& model_id,
                                GenerateParams& p) {
  const auto& diffusion = diffusion_only_fields();
  for (const auto& [key, value] : body.items()) {
    if (value.is_null()) continue;
    const bool refused = key == "temperature" || key == "top_k" || key == "stop_ids" ||
                         (key == "suffix" && !(value.is_string() && value.get<std::string>().empty())) ||
                         (std::find(diffusion.begin(), diffusion.end(), key) != diffusion.end() &&
                          !diffusion_field_applies(key, /*uniform_state=*/true));
    if (!refused) continue;
    const std::string why =
        key == "temperature" ? "its temperature falls from 't_max' to 't_min' over each canvas's steps"
        : key == "steps"     ? "its steps per canvas are 'max_denoising_steps'"
        : key == "suffix"    ? "it has no mask token to infill with; it writes canvas after canvas"
                             : "its settings are max_tokens, seed, max_denoising_steps, t_min, t_max, "
                               "entropy_bound, stability_threshold and confidence_threshold";
    bad(key, "'" + key + "' does not apply to '" + model_id + "', a uniform-state canvas model (" +
                 info.architecture + "): " + why);
  }
  UniformStateParams& u = p.uniform_state;
  if (auto v = get_int(body, "max_denoising_steps", 1, 1 << 20)) u.max_denoising_steps = *v;
  if (auto v = get_number(body, "t_min", 0, 100)) u.t_min = *v;
  if (auto v = get_number(body, "t_max", 0, 100, /*lo_open=*/true)) u.t_max = *v;
  if (auto v = get_number(body, "entropy_bound", 0, 1e6, /*lo_open=*/true)) u.entropy_bound = *v;
  // (The sampler keeps this many argmax canvases per row: bounded.)
  if (auto v = get_int(body, "stability_threshold", 0, 1024)) u.stability_threshold = *v;
  if (auto v = get_number(body, "confidence_threshold", 0, 1e6, /*lo_open=*/true))
    u.confidence_threshold = *v;
  if (u.t_min && u.t_max && !(*u.t_min < *u.t_max)) {
    const bool min_given = field(body, "t_min") != nullptr, max_given = field(body, "t_max") != nullptr;
    bad(min_given ? "t_min" : "t_max",
        "'t_min' must be below 't_max' (the temperature falls from t_max to t_min), got t_min " +
            json(*u.t_min).dump() + (min_given ? "" : " (the model's)") + " and t_max " +
            json(*u.t_max).dump() + (max_given ? "" : " (the model's)"));
  }
}

// Autoregressive models: the sampler's top_k and the stop ids.
void parse_ar_fields(const json& body, const ModelInfo& info, GenerateParams& p) {
  if (auto v = get_int(body, "top_k", 0, 1 << 30)) p.top_k = *v;
  parse_stop_ids(body, info, p);
}

// /v1/completions `suffix`: a diffusion model fills max_tokens masks between the prompt and the suffix.
void parse_suffix(const json& body, const ModelInfo& info, const TextCodec& codec,
                  const std::string& model_id, GenRequest& r) {
  const json* v = field(body, "suffix");
  if (!v) return;
  if (!v->is_string()) bad("suffix", std::string("'suffix' must be a string, got ") + type_name(*v));
  if (v->get<std::string>().empty()) return;
  if (info.autoregressive)
    bad("suffix", "'suffix' (infill) needs a diffusion model: '" + model_id + "' is autoregressive (" +
                      info.architecture + ") and writes left to right only");
  if (info.block_size > 0)
    bad("suffix", "'suffix' (infill) is not offered for block-diffusion models (" + info.architecture + ")");
  if (r.params.mask_id < 0 && info.mask_id < 0)
    bad("suffix", "'suffix' (infill) needs the model's mask id: give 'mask_id'");
  if (field(body, "stop_at_eos") && r.params.stop_at_eos)
    bad("stop_at_eos", "'stop_at_eos' is not supported with 'suffix' (infill)");
  r.params.stop_at_eos = false;
  try {
    r.suffix = codec.encode(v->get<std::string>(), /*add_special_tokens=*/false);
  } catch (const std::exception& e) {
    bad("suffix", std::string("'suffix': ") + e.what());
  }
  r.infill = true;
}

// Byte offset of code point `cp` of UTF-8 `text` (cp = its length: the end); -1 past the end.
int64_t byte_of_code_point(const std::string& text, int64_t cp) {
  int64_t seen = 0;
  for (size_t b = 0; b <= text.size(); ++b) {
    if (b == text.size() || (static_cast<unsigned char>(text[b]) & 0xC0) != 0x80) {
      if (seen == cp) return static_cast<int64_t>(b);
      ++seen;
    }
  }
  return -1;
}

// /v1/canvas: `text` with placeholders, or `text` + `spans` (code-point ranges) -> the canvas to edit.
void parse_canvas(const json& body, const ModelInfo& info, const TextCodec& codec,
                  const RequestPolicy& policy, GenRequest& r) {
  if (info.autoregressive)
    bad("model", "/v1/canvas needs a diffusion model: '" + policy.model_id + "' is autoregressive");
  const int32_t mask = r.params.mask_id >= 0 ? r.params.mask_id : info.mask_id;
  if (mask < 0) bad("mask_id", "the model names no mask id: give 'mask_id'");
  if (r.n != 1) bad("n", "/v1/canvas edits one canvas: 'n' must be 1");
  for (const char* name : {"max_tokens", "stop", "suffix", "stop_at_eos"})
    if (field(body, name))
      bad(name, std::string("'") + name +
                    "' does not apply to /v1/canvas (span lengths are in 'spans' or the " +
                    "placeholders; the canvas is denoised whole)");
  r.params.stop_at_eos = false;
  if (r.stream && !field(body, "diffusing")) r.diffusing = true;  // a streamed canvas edit shows its steps
  const auto text = get_string(body, "text");
  if (!text)
    bad("text", "'text' is required: the document, with <|mask|> / <|mask:N|> placeholders or with 'spans'");
  const std::string mode = get_string(body, "mode").value_or("redo");
  if (mode != "redo" && mode != "refine")
    bad("mode",
        "'mode' must be \"redo\" (the spans are masked and denoised again) or \"refine\" (the spans "
        "keep their text; refine rounds remask their least confident tokens), got \"" +
            mode + "\"");
  auto& d = r.doc;
  d.refine_only = mode == "refine";
  d.rounds = get_int(body, "refine", 0, 64).value_or(d.refine_only ? 1 : 0);
  if (d.refine_only && d.rounds == 0) bad("refine", "'mode': \"refine\" needs 'refine' >= 1 rounds");
  d.tokens_per_round = get_int(body, "refine_tokens", 0, policy.max_tokens).value_or(0);
  if (info.block_size > 0 && d.tokens_per_round > 0)
    bad("refine_tokens",
        "'refine_tokens' does not apply to a block-diffusion model: its refine rounds are "
        "LLaDA2.1's editing passes, which replace every token whose new draw has p > "
        "'editing_threshold'");
  // The literal pieces and, per span, its mask count (redo) or its text (refine).
  std::vector<int64_t> lengths;
  std::vector<std::string> span_texts;
  const json* spans = field(body, "spans");
  if (!spans) {
    if (d.refine_only) bad("mode", "'mode': \"refine\" needs 'spans': the parts of 'text' to refine");
    InfillTemplate t;
    try {
      t = parse_infill_template(*text);
    } catch (const std::exception& e) {
      bad("text", std::string("'text': ") + e.what());
    }
    if (t.lengths.empty())
      bad("text",
          "'text' has no <|mask|> / <|mask:N|> placeholder and no 'spans' are given: nothing to edit");
    d.texts = std::move(t.texts);
    lengths = std::move(t.lengths);
  } else {
    if (!spans->is_array() || spans->empty())
      bad("spans", "'spans' must be a non-empty array of {\"start\", \"end\"[, \"length\"]}");
    // (A malformed placeholder is the text's error here too, not an exception out of the parser.)
    bool placeholders = false;
    try {
      placeholders = !parse_infill_template(*text).lengths.empty();
    } catch (const std::exception& e) {
      bad("text", std::string("'text': ") + e.what());
    }
    if (placeholders) bad("spans", "'text' has placeholders and 'spans' are given: use one or the other");
    int64_t prev_end = 0, prev_byte = 0;
    const int64_t chars = [&] {
      int64_t n = 0;
      for (unsigned char c : *text) n += (c & 0xC0) != 0x80;
      return n;
    }();
    for (size_t k = 0; k < spans->size(); ++k) {
      const json& sp = (*spans)[k];
      const std::string at = "spans[" + std::to_string(k) + "]";
      if (!sp.is_object()) bad("spans", "'" + at + "' must be an object {\"start\", \"end\"[, \"length\"]}");
      for (const auto& [key, _] : sp.items())
        if (key != "start" && key != "end" && key != "length")
          bad("spans", "'" + at + "." + key + "' is not a span field (start, end, length)");
      // A span's own fields are reported as the span's ('spans[k].end ...'), not as top-level fields.
      auto span_int = [&](const char* name, int64_t lo, int64_t hi) {
        try {
          return get_int(sp, name, lo, hi);
        } catch (const FieldError& e) {
          bad("spans", "'" + at + "." + e.message.substr(1));  // "'end' must ..." -> "'spans[k].end' ..."
        }
      };
      const auto start = span_int("start", 0, chars), end = span_int("end", 0, chars);
      if (!start || !end) bad("spans", "'" + at + "' needs 'start' and 'end' (code points of 'text')");
      if (*end < *start)
        bad("spans", "'" + at + "': end " + std::to_string(*end) + " < start " + std::to_string(*start));
      if (*start < prev_end) bad("spans", "'" + at + "' overlaps or precedes the span before it");
      const auto length = span_int("length", 1, policy.max_tokens);
      if (d.refine_only && length) bad("spans", "'" + at + ".length': \"refine\" keeps the span's tokens");
      if (*end == *start && !length)
        bad("spans", "'" + at + "' is empty: give 'length' (tokens to insert) or a non-empty range");
      const int64_t b0 = byte_of_code_point(*text, *start), b1 = byte_of_code_point(*text, *end);
      d.texts.push_back(text->substr(prev_byte, b0 - prev_byte));
      span_texts.push_back(text->substr(b0, b1 - b0));
      lengths.push_back(length.value_or(0));
      prev_end = *end;
      prev_byte = b1;
    }
    d.texts.push_back(text->substr(prev_byte));
  }
  // The canvas: each piece encoded on its own (as dllm infill does), the spans between them.
  auto encode = [&](const std::string& piece, const char* param) {
    try {
      return codec.encode(piece, /*add_special_tokens=*/false);
    } catch (const std::exception& e) {
      bad(param, std::string("'") + param + "': " + e.what());
    }
  };
  auto put = [&](const std::vector<int32_t>& ids, uint8_t editable) {
    d.ids.insert(d.ids.end(), ids.begin(), ids.end());
    d.editable.insert(d.editable.end(), ids.size(), editable);
  };
  int64_t masks = 0;
  for (size_t k = 0; k <= lengths.size(); ++k) {
    const auto ids = encode(d.texts[k], "text");
    if (std::find(ids.begin(), ids.end(), mask) != ids.end())
      bad("text", "'text' outside the spans spells the mask token: it cannot be kept as text");
    put(ids, 0);
    if (k == lengths.size()) break;
    d.span_begin.push_back(static_cast<int64_t>(d.ids.size()));
    if (d.refine_only) {
      const auto ids = encode(span_texts[k], "spans");
      if (ids.empty()) bad("spans", "'spans[" + std::to_string(k) + "]' has no token to refine");
      put(ids, 1);
    } else {
      int64_t n = lengths[k];
      if (n == 0) n = std::max<int64_t>(1, static_cast<int64_t>(encode(span_texts[k], "spans").size()));
      put(std::vector<int32_t>(n, mask), 1);
      masks += n;
    }
    d.span_length.push_back(static_cast<int64_t>(d.ids.size()) - d.span_begin.back());
  }
  if (masks > policy.max_tokens)
    bad("spans", "the spans are " + std::to_string(masks) + " masked tokens, over this server's limit of " +
                     std::to_string(policy.max_tokens));
  for (int32_t id : d.ids)
    if (id >= info.vocab_size)
      bad("text", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                      std::to_string(info.vocab_size) + ")");
  const int64_t size = static_cast<int64_t>(d.ids.size());
  if (size > info.max_seq_len || size > policy.max_prompt_tokens + policy.max_tokens)
    bad("text",
        "the canvas is " + std::to_string(size) + " tokens, over the " +
            (size > info.max_seq_len
                 ? "model's context of " + std::to_string(info.max_seq_len)
                 : "server's limit of " + std::to_string(policy.max_prompt_tokens + policy.max_tokens)) +
            " tokens");
  r.params.gen_length = masks;  // informative: the canvas edit loop counts the masks itself
  // The server's block length / steps defaults apply only where they fit the masks asked for.
  if (!field(body, "block_length") && r.params.block_length > 0 && masks % r.params.block_length != 0)
    r.params.block_length = 0;
  if (!field(body, "steps") && r.params.steps > masks) r.params.steps = 0;
}

}  // namespace

const std::vector<std::string>& diffusion_only_fields() {
  static const std::vector<std::string> fields = [] {
    std::vector<std::string> f = {
        "steps",          "block_length",   "threshold",        "factor",         "cfg_scale",
        "alg_temp",       "diffusing",      "mask_placeholder", "stop_at_eos",    "mask_id",
        "eos_id",         "block_loop",     "minimal_topk",     "eos_early_stop", "editing_threshold",
        "max_post_steps", "num_to_transfer"};
    for (auto& k : strategy_keys()) f.push_back(k);
    for (auto& k : uniform_state_fields()) f.push_back(k);
    return f;
  }();
  return fields;
}

const std::vector<std::string>& uniform_state_fields() {
  static const std::vector<std::string> fields = {
      "max_denoising_steps", "t_min", "t_max", "entropy_bound", "stability_threshold",
      "confidence_threshold"};
  return fields;
}

bool diffusion_field_applies(const std::string& name, bool uniform_state) {
  const auto& own = uniform_state_fields();
  const bool uniform_field = std::find(own.begin(), own.end(), name) != own.end();
  if (!uniform_state) return !uniform_field;
  return uniform_field || name == "diffusing" || name == "mask_placeholder";
}

nlohmann::json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

std::optional<ApiError> parse_request(const json& body, Endpoint endpoint, const TextCodec& codec,
                                      const ModelInfo& info, const RequestPolicy& policy, GenRequest& out) {
  try {
    if (!body.is_object())
      bad("", std::string("the request body must be a JSON object, got ") + type_name(body));
    for (const auto& [key, value] : body.items())
      if (!known_fields(endpoint).count(key)) bad(key, "unknown field '" + key + "'");
    reject_unsupported(body, endpoint);
    const bool uniform_state = policy.canvas_length > 0;
    if (uniform_state && endpoint == Endpoint::kCanvas)
      bad("model", "/v1/canvas edits masked spans: '" + policy.model_id +
                       "' is a uniform-state canvas model (" + info.architecture +
                       ") with no mask token; name a masked diffusion model");
    if (info.autoregressive) reject_diffusion_fields(body, info, policy.model_id);
    GenRequest r;
    r.endpoint = endpoint;
    r.params = policy.defaults;
    // The block loops have their own stops (eos_early_stop, stop_ids); the server's --stop-at-eos is
    // LLaDA's / Dream's.
    if (info.block_size > 0 || info.autoregressive) r.params.stop_at_eos = false;
    if (auto m = get_string(body, "model"); m && *m != policy.model_id && *m != kAutoModel)
      bad("model", "unknown model '" + *m + "'; this server serves '" + policy.model_id + "'");

    int64_t max_tokens = policy.defaults.gen_length;
    if (auto v = get_int(body, "max_tokens", 1, INT32_MAX)) max_tokens = *v;
    if (endpoint == Endpoint::kChat)
      if (auto v = get_int(body, "max_completion_tokens", 1, INT32_MAX)) max_tokens = *v;
    const char* mt_name = field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (max_tokens > policy.max_tokens)
      bad(mt_name, std::string("'") + mt_name + "' " + std::to_string(max_tokens) +
                       " is over this server's limit of " + std::to_string(policy.max_tokens));
    r.params.gen_length = max_tokens;
    // The server's block length default applies only where it divides the length asked for.
    if (!field(body, "block_length") && r.params.block_length > 0 && max_tokens % r.params.block_length != 0)
      r.params.block_length = 0;
    if (!field(body, "steps") && r.params.steps > 0 && r.params.steps > max_tokens) r.params.steps = 0;

    if (auto v = get_number(body, "temperature", 0, 2)) r.params.temperature = *v;
    if (auto v = get_number(body, "top_p", 0, 1, /*lo_open=*/true)) {
      if (*v < 1 && info.architecture != "dream" && !info.autoregressive)
        bad("top_p", "'top_p' < 1 is not supported for " + info.architecture +
                         " models (its sampler has no nucleus filter)" +
                         (uniform_state ? "" : "; use temperature"));
      r.params.top_p = *v;
    }
    if (auto v = get_int(body, "n", 1, policy.max_n)) r.n = static_cast<int>(*v);
    if (auto v = get_int(body, "seed", 0, INT64_MAX)) r.params.seed = static_cast<uint64_t>(*v);
    if (auto v = get_bool(body, "stream")) r.stream = *v;
    if (auto v = get_bool(body, "diffusing")) r.diffusing = *v;
    if (r.diffusing && !r.stream) bad("diffusing", "'diffusing' needs 'stream': true");
    if (const json* so = field(body, "stream_options")) {
      if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
      if (!r.stream) bad("stream_options", "'stream_options' needs 'stream': true");
      if (auto v = get_bool(*so, "include_usage")) r.include_usage = *v;
    }
    r.mask_placeholder = policy.mask_placeholder;
    if (auto v = get_string(body, "mask_placeholder")) r.mask_placeholder = *v;
    if (const json* s = field(body, "stop")) {
      if (s->is_string()) {
        r.stop.push_back(s->get<std::string>());
      } else if (s->is_array() && s->size() <= 4) {
        for (const auto& x : *s) {
          if (!x.is_string()) bad("stop", "'stop' must be a string or an array of up to 4 strings");
          r.stop.push_back(x.get<std::string>());
        }
      } else {
        bad("stop", "'stop' must be a string or an array of up to 4 strings");
      }
      for (const auto& x : r.stop)
        if (x.empty()) bad("stop", "'stop' strings must not be empty");
    }
    if (info.autoregressive) {
      parse_ar_fields(body, info, r.params);
      r.end_ids = autoregressive_stop_ids(info, r.params);
    } else if (uniform_state) {
      parse_uniform_state_fields(body, info, policy.model_id, r.params);
      r.end_ids = info.eog_ids;  // any of its EOS ids ends a row (pad follows)
    } else {
      parse_dllm_fields(body, info, r.params);
    }
    if (endpoint == Endpoint::kCompletions) parse_suffix(body, info, codec, policy.model_id, r);
    if (endpoint == Endpoint::kCanvas) {
      parse_canvas(body, info, codec, policy, r);
      out = std::move(r);
      return std::nullopt;
    }

    r.prompt = endpoint == Endpoint::kChat ? chat_prompt(body, codec) : completion_prompt(body, codec);
    const char* prompt_name = endpoint == Endpoint::kChat ? "messages" : "prompt";
    if (r.prompt.empty()) bad(prompt_name, std::string("'") + prompt_name + "' must not be empty");
    for (int32_t id : r.prompt)
      if (id >= info.vocab_size)
        bad(prompt_name, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(info.vocab_size) + ")");
    if (static_cast<int64_t>(r.prompt.size()) > policy.max_prompt_tokens)
      bad(prompt_name, std::string("'") + prompt_name + "' is " + std::to_string(r.prompt.size()) +
                           " tokens, over this server's limit of " +
                           std::to_string(policy.max_prompt_tokens));
    for (int32_t id : r.suffix)
      if (id >= info.vocab_size)
        bad("suffix", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                          std::to_string(info.vocab_size) + ")");
    const int64_t context = static_cast<int64_t>(r.prompt.size() + r.suffix.size());
    if (context + max_tokens > info.max_seq_len)
      bad(mt_name, std::string("the prompt") + (r.infill ? " and suffix (" : " (") + std::to_string(context) +
                       " tokens) + '" + mt_name + "' (" + std::to_string(max_tokens) +
                       ") exceed the model's context of " + std::to_string(info.max_seq_len) + " tokens");
    if (uniform_state) {
      // Whole canvases run (the answer is their first max_tokens tokens). max_length = prompt + max_tokens:
      // the reference's max_length (counted only when max_new_tokens is 256) says the same as max_tokens.
      const int64_t L = policy.canvas_length, run = (max_tokens + L - 1) / L * L;
      if (context + run > info.max_seq_len)
        bad(mt_name, "the prompt (" + std::to_string(context) + " tokens) + '" + mt_name + "' (" +
                         std::to_string(max_tokens) + ", run as " + std::to_string(run / L) +
                         " canvases of " + std::to_string(L) + ") exceed the model's context of " +
                         std::to_string(info.max_seq_len) + " tokens");
      r.params.uniform_state.max_new_tokens = max_tokens;
      r.params.uniform_state.max_length = context + max_tokens;
    }
    out = std::move(r);
    return std::nullopt;
  } catch (const FieldError& e) {
    ApiError err;
    err.status = e.status;
    err.message = e.message;
    err.param = e.param;
    if (e.param == "model") err.code = "model_not_found";
    return err;
  }
}

}  // namespace dllm::server
