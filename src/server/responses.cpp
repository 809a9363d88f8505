#include "server/responses.h"

#include <algorithm>
#include <chrono>
#include <random>

namespace dllm::server {

using nlohmann::json;

ResponseMeta make_meta(Endpoint endpoint, const std::string& model) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char hex[25];
  std::snprintf(hex, sizeof hex, "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  ResponseMeta m;
  m.endpoint = endpoint;
  m.id = (endpoint == Endpoint::kChat     ? "chatcmpl-"
          : endpoint == Endpoint::kCanvas ? "canvas-"
                                          : "cmpl-") +
         std::string(hex);
  m.model = model;
  m.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  return m;
}

namespace {

json head(const ResponseMeta& m, bool chunk) {
  const char* object = m.endpoint == Endpoint::kChat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                     : "text_completion";
  return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}

json reason(const std::string& r) {
  return r.empty() ? json(nullptr) : json(r);
}

}  // namespace

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json full_response(const ResponseMeta& m, const std::vector<ChoiceResult>& choices, int64_t prompt_tokens,
                   const json& stats) {
  json out = head(m, false);
  json arr = json::array();
  int64_t completion = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    completion += c.tokens;
    if (m.endpoint == Endpoint::kChat)
      arr.push_back({{"index", i},
                     {"message", {{"role", "assistant"}, {"content", c.text}}},
                     {"logprobs", nullptr},
                     {"finish_reason", c.finish_reason}});
    else
      arr.push_back(
          {{"index", i}, {"text", c.text}, {"logprobs", nullptr}, {"finish_reason", c.finish_reason}});
  }
  out["choices"] = std::move(arr);
  out["usage"] = usage_json(prompt_tokens, completion);
  out["dllm"] = stats;
  return out;
}

json text_chunk(const ResponseMeta& m, int index, const std::string& text, const std::string& finish_reason,
                bool role_only) {
  json out = head(m, true);
  json choice = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", reason(finish_reason)}};
  if (m.endpoint == Endpoint::kChat) {
    if (role_only)
      choice["delta"] = {{"role", "assistant"}, {"content", ""}};
    else if (text.empty())
      choice["delta"] = json::object();
    else
      choice["delta"] = {{"content", text}};
  } else {
    choice["text"] = text;
  }
  out["choices"] = json::array({choice});
  return out;
}

json usage_chunk(const ResponseMeta& m, int64_t prompt_tokens, int64_t completion_tokens) {
  json out = head(m, true);
  out["choices"] = json::array();
  out["usage"] = usage_json(prompt_tokens, completion_tokens);
  return out;
}

json diffusion_chunk(const ResponseMeta& m, const TextCodec& codec, const StepUpdate& u,
                     const std::string& placeholder, double elapsed_ms, int32_t mask_id) {
  json out = head(m, true);
  json choices = json::array(), rows = json::array();
  for (size_t r = 0; r < u.canvas.size(); ++r) {
    json choice = {{"index", r}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    if (m.endpoint == Endpoint::kChat)
      choice["delta"] = json::object();
    else
      choice["text"] = "";
    choices.push_back(std::move(choice));
    const TextCodec::Pieces p = codec.pieces(u.canvas[r], mask_id);
    json pieces = json::array();
    int64_t masked = 0;
    for (size_t i = 0; i < p.text.size(); ++i) {
      if (p.masked[i]) {
        ++masked;
        pieces.push_back(nullptr);
      } else {
        pieces.push_back(p.text[i]);
      }
    }
    rows.push_back({{"index", r},
                    {"canvas", codec.canvas_text(u.canvas[r], placeholder, mask_id)},
                    {"pieces", std::move(pieces)},
                    {"committed", r < u.committed.size() ? json(u.committed[r]) : json::array()},
                    {"edited", r < u.edited.size() ? json(u.edited[r]) : json::array()},
                    {"final", r < u.final_prefix.size() ? u.final_prefix[r] : int64_t(u.canvas[r].size())},
                    {"masked", masked},
                    {"length", u.canvas[r].size()}});
  }
  out["choices"] = std::move(choices);
  out["diffusion"] = {{"step", u.step},
                      {"block", u.block},
                      {"forwards", u.forwards},
                      {"elapsed_ms", elapsed_ms},
                      {"rows", std::move(rows)}};
  return out;
}

namespace {

int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Canvas positions in [begin, begin + length) -> offsets in the span.
json span_offsets(const std::vector<int64_t>& positions, int64_t begin, int64_t length) {
  json out = json::array();
  for (int64_t p : positions)
    if (p >= begin && p < begin + length) out.push_back(p - begin);
  return out;
}

}  // namespace

json canvas_document(const TextCodec& codec, const GenRequest::CanvasDoc& doc,
                     const std::vector<int32_t>& canvas, const std::string& placeholder, int32_t mask_id,
                     const StepUpdate* u) {
  const int32_t mask = mask_id >= 0 ? mask_id : codec.mask_id();
  std::string text = doc.texts.empty() ? std::string() : doc.texts[0];
  json spans = json::array();
  for (size_t k = 0; k < doc.span_begin.size(); ++k) {
    const int64_t b = doc.span_begin[k], n = doc.span_length[k];
    if (b + n > static_cast<int64_t>(canvas.size())) break;
    const std::vector<int32_t> ids(canvas.begin() + b, canvas.begin() + b + n);
    const int64_t masked = std::count(ids.begin(), ids.end(), mask);
    const std::string piece = masked ? codec.canvas_text(ids, placeholder, mask_id) : codec.decode(ids);
    json span = {{"start", code_points(text)},
                 {"end", code_points(text) + code_points(piece)},
                 {"text", piece},
                 {"masked", masked},
                 {"tokens", n}};
    if (u) {
      const TextCodec::Pieces p = codec.pieces(ids, mask_id);
      json pieces = json::array();
      for (size_t i = 0; i < p.text.size(); ++i)
        pieces.push_back(p.masked[i] ? json(nullptr) : json(p.text[i]));
      span["pieces"] = std::move(pieces);
      span["committed"] = u->committed.empty() ? json::array() : span_offsets(u->committed[0], b, n);
      span["edited"] = u->edited.empty() ? json::array() : span_offsets(u->edited[0], b, n);
    }
    spans.push_back(std::move(span));
    text += piece;
    if (k + 1 < doc.texts.size()) text += doc.texts[k + 1];
  }
  return {{"text", text}, {"spans", spans}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse(const json& j) {
  std::string out = "data: ";
  out += dump(j);
  out += "\n\n";
  return out;
}

}  // namespace dllm::server
