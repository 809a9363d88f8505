// The router behind the virtual model "auto" (docs/hybrid.md): which served model answers a request, and why.
// A pure policy: what it reads of a request (RouteFeatures, taken from the JSON body by route_features) and
// the served models' names and kinds go in, a decision with a bounded reason label and a sentence comes out.
//
// The policy, first rule that applies:
//   1. only one kind of model is loaded                       -> the first model (in --model order) only_kind
//   2. a non-empty `suffix` (infill: an AR model cannot)      -> the first masked diffusion model   infill
//   3. a diffusion-only field (steps, block_length, ...)      -> the first diffusion model taking them
//                                                                all (see below)           diffusion_fields
//   4. a keyword in the last user message / the prompt text   -> the first diffusion model          keyword
//   5. max_tokens > short_max_tokens                          -> the first diffusion model long_generation
//   6. otherwise (a short generation)                         -> the first autoregressive model
//   short_generation
// A request that names a model is not routed: reason "requested"; one that names none goes to the default
// (first) model: reason "default". Rules 2 and 3 fall back to the first diffusion model (whose validation
// then names the field) when none fits: a uniform-state canvas model (DiffusionGemma) takes its own sampler
// fields and no masked-diffusion ones, and cannot infill.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace dllm::server {

// The virtual model whose requests the router places.
inline constexpr std::string_view kAutoModel = "auto";

enum class ModelKind { kDiffusion, kAutoregressive };
const char* kind_name(ModelKind kind);  // "diffusion" | "autoregressive"

// The bounded set of reasons (the `reason` label of dllm_route_total).
enum class RouteReason {
  kRequested,        // the request named the model
  kDefault,          // the request named no model: the default (first) one
  kOnlyKind,         // one kind of model is loaded: everything goes there
  kInfill,           // `suffix` given
  kDiffusionFields,  // a diffusion-only request field given
  kKeyword,          // a rewrite-style keyword in the last user message (chat) or the prompt (completions)
  kLongGeneration,   // max_tokens above the threshold
  kShortGeneration,  // max_tokens at or below the threshold
};
const char* reason_name(RouteReason reason);  // "requested", "only_kind", ... (snake_case, as above)
const std::vector<RouteReason>& all_route_reasons();

struct RouterConfig {
  int64_t short_max_tokens = 256;  // max_tokens <= this is a short generation (-> AR)
  // Case-insensitive; a keyword matches where it starts a word ("Rewrite", "refactoring", "fill in the").
  std::vector<std::string> keywords = {"rewrite", "refactor", "fill in", "infill", "rephrase"};
};

// What the router reads of a request. Fields of the wrong type read as absent: the chosen model's request
// validation answers them with a 400 naming the field.
struct RouteFeatures {
  bool chat = false;
  int64_t max_tokens = 0;  // max_completion_tokens / max_tokens, or the server default
  bool max_tokens_given = false;
  bool suffix = false;                        // a non-empty suffix string
  std::vector<std::string> diffusion_fields;  // diffusion-only fields given (non-null), in body order
  std::string text;                           // the last user message (chat) or the prompt when it is text
};
RouteFeatures route_features(const nlohmann::json& body, bool chat, int64_t default_max_tokens);

struct RouteTarget {
  std::string name;
  ModelKind kind = ModelKind::kDiffusion;
  bool uniform_state = false;  // a uniform-state canvas model (Model::canvas_decoder(): DiffusionGemma)
};

struct RouteDecision {
  size_t model = 0;  // index into the targets
  RouteReason reason = RouteReason::kRequested;
  std::string detail;  // a sentence: "max_tokens 512 > 256: long generation -> diffusion"
};

// `targets` is not empty.
RouteDecision route(const RouteFeatures& f, const std::vector<RouteTarget>& targets,
                    const RouterConfig& config);

// {"model", "kind", "reason", "detail"}: the `dllm.route` object of a response.
nlohmann::json route_json(const RouteDecision& d, const std::vector<RouteTarget>& targets);

// "a,b , c" -> {"a", "b", "c"} (empty items dropped; "" -> none).
std::vector<std::string> split_keywords(const std::string& list);

}  // namespace dllm::server
