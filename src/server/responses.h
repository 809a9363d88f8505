// The JSON the OpenAI routes answer: whole responses, SSE chunks, and the "diffusing" step events
// (docs/server.md describes each).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/request.h"
#include "server/scheduler.h"
#include "server/text_codec.h"

namespace dllm::server {

struct ResponseMeta {
  std::string id;  // "cmpl-..." / "chatcmpl-..."
  std::string model;
  int64_t created = 0;
  Endpoint endpoint = Endpoint::kCompletions;
};
ResponseMeta make_meta(Endpoint endpoint, const std::string& model);

struct ChoiceResult {
  std::string text;
  std::string finish_reason;  // "stop" | "length"
  int64_t tokens = 0;         // completion tokens
};

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);
// The non-streamed answer.
nlohmann::json full_response(const ResponseMeta& m, const std::vector<ChoiceResult>& choices,
                             int64_t prompt_tokens, const nlohmann::json& stats);
// One streamed chunk with text for one choice (finish_reason "" = null). Chat: `role_only` sends the first
// chunk's {"role": "assistant", "content": ""}.
nlohmann::json text_chunk(const ResponseMeta& m, int index, const std::string& text,
                          const std::string& finish_reason, bool role_only = false);
// The chunk that carries only usage (stream_options.include_usage).
nlohmann::json usage_chunk(const ResponseMeta& m, int64_t prompt_tokens, int64_t completion_tokens);
// A diffusing step event: choices with empty deltas (ordinary clients see nothing) + "diffusion".
// `mask_id` >= 0: the request's own mask id.
nlohmann::json diffusion_chunk(const ResponseMeta& m, const TextCodec& codec, const StepUpdate& u,
                               const std::string& placeholder, double elapsed_ms, int32_t mask_id = -1);

// /v1/canvas (docs/server.md "Canvas editing"): the document as `canvas` leaves it: {"text", "spans":
// [{"start", "end" (code points of text), "text", "masked"}]}; masks read as `placeholder`. With `u` (a step
// of a stream): each span also has "pieces" (per token: its text, or null while masked), "committed" and
// "edited" (token offsets in the span).
nlohmann::json canvas_document(const TextCodec& codec, const GenRequest::CanvasDoc& doc,
                               const std::vector<int32_t>& canvas, const std::string& placeholder,
                               int32_t mask_id, const StepUpdate* u = nullptr);

// "data: <json>\n\n"
std::string sse(const nlohmann::json& j);
// j.dump(), invalid UTF-8 (from a prompt or a token) replaced by U+FFFD instead of throwing.
std::string dump(const nlohmann::json& j);

}  // namespace dllm::server
