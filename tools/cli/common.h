// Pieces several subcommands share: model path defaults, option parsing helpers, loading with a status line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dllm/dllm.h"
#include "hub/hub_ref.h"

namespace CLI {
class App;
}

namespace dllm::cli {

// The model `dllm` uses when -m is not given: the demo model shipped in the repository.
std::string default_model_path();
// "480,158,483" or "480 158 483" -> ids; the error names the bad item.
std::vector<int32_t> parse_ids(const std::string& text);
Precision parse_dtype(const std::string& name);  // "auto" | "f32" | "bf16" | "f16"
std::string dtype_label(Precision p);
// /proc/loadavg's 1, 5 and 15 minute averages ("0.00 0.01 0.05"; "" where unreadable): timings are only
// trustworthy on an idle machine, so the benchmarks print it.
std::string loadavg();
// The --dtype help, one text for every command.
inline constexpr const char* kDtypeHelp =
    "Weights and products: auto (the checkpoint's own precision: f32 files run f32, the exact path; bf16 "
    "files bf16; f16 files f16) | f32 (exact: f32 weights and products) | bf16 (bf16 weights, f16 ones "
    "rounded "
    "to bf16: half the memory; bf16 products with AVX512_BF16, f32 products on the bf16 weights elsewhere) | "
    "f16 (f16 weights, f32 and bf16 ones rounded to f16; f32 activations and products)";
WeightFormat parse_weights(const std::string& name);  // "auto" | "f32" | "q8"
// Registers --weights on a subcommand (generate, bench, serve); load_model_or_throw loads with its value.
void add_weights_option(CLI::App* cmd);
std::string& weights_flag();  // the --weights value as given
std::string& experts_flag();  // --experts first-use | load | in-place
ExpertPacking parse_experts(const std::string& name);
std::string& prepare_flag();  // --prepare background | load | never
WeightLayout parse_prepare(const std::string& name);
// --backend cpu|vulkan and --device N (generate, infill, rewrite, serve, bench); load_model_or_throw loads
// with them, and use_backend_flags moves a model made another way (bench's random models) onto them.
void add_backend_options(CLI::App* cmd);
std::string& backend_flag();
int& device_flag();
BackendKind parse_backend(const std::string& name);
void use_backend_flags(Model& model, bool quiet);
// -m / --model / --draft take a path, or a Hugging Face id org/name[@revision][:quant] (docs/hub.md): the
// model from the Hugging Face cache, downloaded into it first (progress on stderr unless quiet) unless
// --offline. add_hub_options registers --offline and --hf-token on a subcommand; resolve_model returns what
// to load.
void add_hub_options(CLI::App* cmd);
void apply_hub_flags(hub::HubSettings& settings);  // --offline, --hf-token over the environment's settings
std::string resolve_model(const std::string& path_or_id, bool quiet);
// Loads and prints one line about the model to stderr unless quiet.
std::shared_ptr<Model> load_model_or_throw(const std::string& path, Precision precision, int threads,
                                           bool quiet);
// --draft: the drafter must map ids to the same text as the model (both tokenizers, compared id by id); the
// error names the first id that differs.
void check_same_vocabulary(const std::string& model, const std::string& draft);
// --draft-tokens / --draft-steps / --draft-cache, registered once for `generate` and `serve`.
void add_draft_options(CLI::App* cmd, DraftParams& draft);
bool stderr_is_terminal();
bool stdout_is_terminal();

}  // namespace dllm::cli
