// Models of a named shape with random weights, for benchmarks of real sizes that are not on disk
// (`dllm bench --shape llada2-mini --layers 2`). A shape is the model's real config.json, read by its
// family's parser, so a random model has exactly the structure of the checkpoint (experts, fused QKV, dense
// layers, ...).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dllm/dllm.h"

namespace dllm {

struct ModelShape {
  std::string name;
  std::string family;  // registry name: its config parser and tensor table give the model
  std::string config;  // config.json text (the real checkpoint's sizes)
};

const std::vector<ModelShape>& known_shapes();          // llada-8b, dream-7b, llada2-mini, sdar-8b, ...
const ModelShape& find_shape(const std::string& name);  // error lists the known names
std::string shape_names();                              // "llada-8b, dream-7b, ..."

// How a random model holds its weight matrices: as `precision` (plain), in quant::LinearQ8 (q8: the 8-bit
// form GGUF files load into today), or in GGUF blocks multiplied in place by quant::LinearGgml (q8_0, q4_k:
// what a file of that type runs as). The router stays f32; a matrix whose width is not whole blocks stays
// plain.
enum class RandomWeights { kPlain, kQ8, kQ8_0, kQ4_0, kQ4_K, kQ6_K };
// "auto" / "f32" (plain), "q8", "q8_0", "q4_0", "q4_k", "q6_k"
RandomWeights parse_random_weights(const std::string& name);

// Every tensor of the family's table: matrices, biases and expert biases uniform with std 0.02, norms 1,
// weights held as `precision` (kAuto = bf16, the default of a real checkpoint of these sizes) or as `weights`
// says. n_layers overrides the config's layer count when > 0.
// experts: how quantized experts are held, as LoadOptions::experts (ExpertPacking). backend: where the model
// will run (set_backend, by the caller): a device gets Q8_0 / Q4_K as GGUF blocks (as the GGUF loader leaves
// them for a device), never packed for the CPU's kernels.
std::shared_ptr<Model> make_random_model(const ModelShape& shape, int64_t n_layers, Precision precision,
                                         uint64_t seed, RandomWeights weights = RandomWeights::kPlain,
                                         ExpertPacking experts = ExpertPacking::kOnFirstUse,
                                         BackendKind backend = BackendKind::kCpu);

}  // namespace dllm
