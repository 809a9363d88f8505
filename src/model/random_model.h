// Models of a named shape with random weights, for benchmarks of real sizes that are not on disk
// (`dllm bench --shape llada-8b --layers 2`).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dllm/dllm.h"

namespace dllm {

struct ModelShape {
  std::string name;
  std::string family;  // registry name: its tensor table gives the weights
  int64_t d_model, n_layers, n_heads, n_kv_heads, ffn_hidden, vocab_size;
};

const std::vector<ModelShape>& known_shapes();  // llada-8b, dream-7b, llada-tiny, ...
const ModelShape& find_shape(const std::string& name);  // error lists the known names

// Every tensor of the family's table: matrices and biases uniform with std 0.02, norms 1, weights held as
// `precision` (kAuto = bf16, the default of a real checkpoint of these sizes). n_layers overrides the shape's layer
// count when > 0.
std::shared_ptr<Model> make_random_model(const ModelShape& shape, int64_t n_layers, Precision precision,
                                         uint64_t seed);

}  // namespace dllm
