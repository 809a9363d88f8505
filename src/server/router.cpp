#include "server/router.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "server/request.h"

namespace dllm::server {

using nlohmann::json;

const char* kind_name(ModelKind kind) {
  return kind == ModelKind::kDiffusion ? "diffusion" : "autoregressive";
}

const char* reason_name(RouteReason reason) {
  switch (reason) {
    case RouteReason::kRequested:
      return "requested";
    case RouteReason::kDefault:
      return "default";
    case RouteReason::kOnlyKind:
      return "only_kind";
    case RouteReason::kInfill:
      return "infill";
    case RouteReason::kDiffusionFields:
      return "diffusion_fields";
    case RouteReason::kKeyword:
      return "keyword";
    case RouteReason::kLongGeneration:
      return "long_generation";
    case RouteReason::kShortGeneration:
      return "short_generation";
  }
  return "requested";
}

const std::vector<RouteReason>& all_route_reasons() {
  static const std::vector<RouteReason> all = {RouteReason::kRequested,       RouteReason::kDefault,
                                               RouteReason::kOnlyKind,        RouteReason::kInfill,
                                               RouteReason::kDiffusionFields, RouteReason::kKeyword,
                                               RouteReason::kLongGeneration,  RouteReason::kShortGeneration};
  return all;
}

namespace {

// The text of a chat message's content: a string, or the concatenated text parts ("" for anything else).
std::string content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (content.is_array())
    for (const auto& part : content)
      if (part.is_object() && part.contains("text") && part["text"].is_string())
        text += part["text"].get<std::string>();
  return text;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// The first keyword that starts a word of `text` (case-insensitive), or "".
std::string find_keyword(const std::string& text, const std::vector<std::string>& keywords) {
  const std::string t = lower(text);
  for (const auto& k : keywords) {
    const std::string key = lower(k);
    if (key.empty()) continue;
    for (size_t at = t.find(key); at != std::string::npos; at = t.find(key, at + 1))
      if (at == 0 || !word_char(t[at - 1])) return k;
  }
  return "";
}

std::optional<int64_t> integer(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float() &&
      it->get<double>() == static_cast<double>(static_cast<int64_t>(it->get<double>())))
    return static_cast<int64_t>(it->get<double>());
  return std::nullopt;
}

}  // namespace

RouteFeatures route_features(const json& body, bool chat, int64_t default_max_tokens) {
  RouteFeatures f;
  f.chat = chat;
  f.max_tokens = default_max_tokens;
  if (!body.is_object()) return f;
  if (auto v = integer(body, "max_tokens")) {
    f.max_tokens = *v;
    f.max_tokens_given = true;
  }
  if (chat)
    if (auto v = integer(body, "max_completion_tokens")) {
      f.max_tokens = *v;
      f.max_tokens_given = true;
    }
  auto suffix = body.find("suffix");
  f.suffix = !chat && suffix != body.end() && suffix->is_string() && !suffix->get<std::string>().empty();
  const auto& diffusion = diffusion_only_fields();
  for (const auto& [key, value] : body.items())
    if (!value.is_null() && std::find(diffusion.begin(), diffusion.end(), key) != diffusion.end())
      f.diffusion_fields.push_back(key);
  if (chat) {
    auto messages = body.find("messages");
    if (messages != body.end() && messages->is_array())
      for (auto it = messages->rbegin(); it != messages->rend(); ++it)
        if (it->is_object() && it->value("role", json()) == "user" && it->contains("content")) {
          f.text = content_text((*it)["content"]);
          break;
        }
  } else {
    auto prompt = body.find("prompt");
    if (prompt != body.end()) {
      if (prompt->is_string())
        f.text = prompt->get<std::string>();
      else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string())
        f.text = (*prompt)[0].get<std::string>();
    }
  }
  return f;
}

RouteDecision route(const RouteFeatures& f, const std::vector<RouteTarget>& targets,
                    const RouterConfig& config) {
  auto first_of = [&](ModelKind kind) -> std::optional<size_t> {
    for (size_t i = 0; i < targets.size(); ++i)
      if (targets[i].kind == kind) return i;
    return std::nullopt;
  };
  const auto diffusion = first_of(ModelKind::kDiffusion);
  const auto ar = first_of(ModelKind::kAutoregressive);
  RouteDecision d;
  if (!diffusion || !ar) {
    d.model = 0;
    d.reason = RouteReason::kOnlyKind;
    d.detail = std::string("only ") + kind_name(targets[0].kind) + " models are served -> " + targets[0].name;
    return d;
  }
  // The first diffusion model that `fits` (else the first diffusion model).
  auto to_diffusion = [&](RouteReason reason, std::string why, const auto& fits) {
    d.model = *diffusion;
    for (size_t i = 0; i < targets.size(); ++i)
      if (targets[i].kind == ModelKind::kDiffusion && fits(targets[i])) {
        d.model = i;
        break;
      }
    d.reason = reason;
    d.detail = std::move(why) + " -> diffusion (" + targets[d.model].name + ")";
    return d;
  };
  auto any = [](const RouteTarget&) { return true; };
  if (f.suffix)
    return to_diffusion(RouteReason::kInfill, "suffix given: infill",
                        [](const RouteTarget& t) { return !t.uniform_state; });
  if (!f.diffusion_fields.empty())
    return to_diffusion(
        RouteReason::kDiffusionFields, "'" + f.diffusion_fields.front() + "' is a diffusion-only field",
        [&](const RouteTarget& t) {
          return std::all_of(
              f.diffusion_fields.begin(), f.diffusion_fields.end(),
              [&](const std::string& name) { return diffusion_field_applies(name, t.uniform_state); });
        });
  if (std::string k = find_keyword(f.text, config.keywords); !k.empty())
    return to_diffusion(
        RouteReason::kKeyword,
        std::string("keyword '") + k + "' in the " + (f.chat ? "last user message" : "prompt"), any);
  const std::string mt =
      "max_tokens " + std::to_string(f.max_tokens) + (f.max_tokens_given ? "" : " (default)");
  if (f.max_tokens > config.short_max_tokens)
    return to_diffusion(RouteReason::kLongGeneration,
                        mt + " > " + std::to_string(config.short_max_tokens) + ": long generation", any);
  d.model = *ar;
  d.reason = RouteReason::kShortGeneration;
  d.detail = mt + " <= " + std::to_string(config.short_max_tokens) +
             ": short generation -> autoregressive (" + targets[*ar].name + ")";
  return d;
}

json route_json(const RouteDecision& d, const std::vector<RouteTarget>& targets) {
  const RouteTarget& t = targets.at(d.model);
  return {{"model", t.name},
          {"kind", kind_name(t.kind)},
          {"reason", reason_name(d.reason)},
          {"detail", d.detail}};
}

std::vector<std::string> split_keywords(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    const size_t a = item.find_first_not_of(" \t");
    const size_t b = item.find_last_not_of(" \t");
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
    start = end + 1;
  }
  return out;
}

}  // namespace dllm::server
