// OpenAI request bodies (/v1/completions, /v1/chat/completions) -> a validated generation request. Every
// problem is an ApiError value naming the field at fault (the server answers it as a 4xx JSON error).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dllm/dllm.h"
#include "server/text_codec.h"

namespace dllm::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // the request field at fault ("" when none)
  std::string type = "invalid_request_error";
  std::string code;
};
// {"error": {"message", "type", "param", "code"}} as OpenAI answers.
nlohmann::json error_body(const ApiError& e);

// What `dllm serve` was started with that shapes requests: the served model's id, defaults, limits.
struct RequestPolicy {
  std::string model_id;
  GenerateParams defaults;    // gen_length = the default max_tokens; steps, block_length, ... defaults
  int64_t max_tokens = 1024;  // largest max_tokens a request may ask for
  int64_t max_prompt_tokens = 4096;
  int max_n = 8;
  std::string mask_placeholder = "\u2591";
  // > 0: the model is a uniform-state canvas model (DiffusionGemma: Model::canvas_decoder()) whose canvases
  // are this long; defaults.uniform_state then holds its generation_config.json settings. Such a model takes
  // uniform_state_fields() and refuses the masked-diffusion ones.
  int64_t canvas_length = 0;
};

enum class Endpoint { kCompletions, kChat, kCanvas };

struct GenRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::vector<int32_t> prompt;
  int n = 1;
  GenerateParams params;
  std::vector<std::string> stop;
  bool stream = false, diffusing = false, include_usage = false;
  std::string mask_placeholder;
  // /v1/completions with a non-empty `suffix` (diffusion models): the canvas is prompt + max_tokens masks +
  // suffix, run by dllm::infill; the answer is the filled masks.
  bool infill = false;
  std::vector<int32_t> suffix;
  // /v1/canvas (docs/server.md "Canvas editing"): the document split at its spans. The answer is texts[0] +
  // span 0's new text + texts[1] + ...: everything outside the spans comes back byte for byte.
  struct CanvasDoc {
    std::vector<std::string> texts;                // the n + 1 literal pieces around the n spans
    std::vector<int64_t> span_begin, span_length;  // canvas positions of each span
    std::vector<int32_t> ids;                      // the canvas: pieces' ids, spans as masks (or tokens)
    std::vector<uint8_t> editable;                 // per position: inside a span
    int64_t rounds = 0, tokens_per_round = 0;      // refine rounds after the fill, k per round (0: a quarter)
    bool refine_only = false;                      // mode "refine": the spans keep their text
  } doc;
  // Autoregressive models: the ids that end a choice's text (the model's end-of-generation ids or stop_ids).
  std::vector<int32_t> end_ids;
};

// The request fields only a diffusion model takes (the dLLM extensions: steps, block_length, the strategy
// words, diffusing, ...): an autoregressive model answers them with a 400 naming the field, and the router
// sends a request carrying one to a diffusion model.
const std::vector<std::string>& diffusion_only_fields();

// The request fields of a uniform-state canvas model's sampler (DiffusionGemma), by the reference's names:
// max_denoising_steps, t_min, t_max, entropy_bound, stability_threshold, confidence_threshold. They are among
// diffusion_only_fields(); a masked diffusion model refuses them.
const std::vector<std::string>& uniform_state_fields();
// Whether a diffusion model takes the diffusion-only field `name`: a uniform-state canvas model takes its own
// fields plus diffusing and mask_placeholder, a masked one every diffusion-only field but those.
bool diffusion_field_applies(const std::string& name, bool uniform_state);

// Fills `out` or returns the error. `body` is the parsed JSON (the caller answers malformed JSON itself).
// `model` must be absent, policy.model_id, or "auto" (the router chose this model); an autoregressive `info`
// takes the OpenAI fields plus top_k and stop_ids, and refuses the diffusion-only ones; a uniform-state
// canvas model (policy.canvas_length > 0) takes the OpenAI fields but temperature, top_p < 1 and suffix, plus
// its own (params.uniform_state: max_tokens is max_new_tokens), and refuses the masked-diffusion ones.
std::optional<ApiError> parse_request(const nlohmann::json& body, Endpoint endpoint, const TextCodec& codec,
                                      const ModelInfo& info, const RequestPolicy& policy, GenRequest& out);

}  // namespace dllm::server
