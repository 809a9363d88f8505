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
};

enum class Endpoint { kCompletions, kChat };

struct GenRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::vector<int32_t> prompt;
  int n = 1;
  GenerateParams params;
  std::vector<std::string> stop;
  bool stream = false, diffusing = false, include_usage = false;
  std::string mask_placeholder;
};

// Fills `out` or returns the error. `body` is the parsed JSON (the caller answers malformed JSON itself).
std::optional<ApiError> parse_request(const nlohmann::json& body, Endpoint endpoint, const TextCodec& codec,
                                      const ModelInfo& info, const RequestPolicy& policy, GenRequest& out);

}  // namespace dllm::server
