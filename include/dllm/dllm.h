// dllm.cpp public API: load a diffusion language model and generate with it.
//
//   auto model = dllm::Model::load("path/to/LLaDA-8B-Instruct").value();
//   dllm::GenerateParams p;  p.gen_length = 64;  p.block_length = 16;  p.steps = 32;
//   auto result = dllm::generate(*model, {{prompt ids...}}, p).value();
//
// Errors are values: every call returns dllm::Expected<T>, whose error() names the file, field or value at fault.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dllm/error.h"

namespace dllm {

// How matmuls run. kF32 is exact (f32 weights and activations); kBF16 keeps weights and activations in bf16 with
// f32 accumulation, the fast path on CPUs with AVX512_BF16.
enum class ComputeType { kF32, kBF16 };

struct LoadOptions {
  ComputeType compute = ComputeType::kBF16;
  int threads = 0;  // 0 = all cores
};

struct ModelInfo {
  std::string path;
  std::string architecture;  // registry name: "llada", "dream", ...
  int64_t vocab_size = 0;    // logits per position
  int64_t d_model = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn_hidden = 0;
  int64_t max_seq_len = 0;
  int64_t n_params = 0;
  int32_t mask_id = -1, eos_id = -1, eot_id = -1, bos_id = -1, pad_id = -1;
  bool shift_logits = false;  // Dream: position i is predicted by the output at i-1
  ComputeType compute = ComputeType::kF32;
};

// Per-call inputs of a forward pass: `batch` rows of equal length, row-major tokens.
struct ForwardInput {
  std::span<const int32_t> tokens;  // [batch * seq_len]
  int64_t batch = 1;
  int64_t logits_from = 0;  // logits are produced only for positions >= logits_from (saves the vocab matmul)
  // Optional: per-layer hidden states of row 0, HF convention ([L+1][seq_len * d_model]).
  std::vector<std::vector<float>>* hidden_states = nullptr;
};

class Model {
 public:
  static Expected<std::shared_ptr<Model>> load(const std::string& path, const LoadOptions& options = {});
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  // Raw model logits [batch, seq_len - logits_from, vocab_size] (no Dream shift applied).
  virtual Expected<std::vector<float>> forward(const ForwardInput& input) = 0;
};

enum class Remasking { kLowConfidence, kRandom };

// The official LLaDA generate() settings, plus options that are off by default so that exact mode stays exact.
struct GenerateParams {
  int64_t gen_length = 128;
  int64_t block_length = 0;  // 0 = gen_length (one block)
  int64_t steps = 0;         // 0 = gen_length (one token per step)
  Remasking remasking = Remasking::kLowConfidence;
  double temperature = 0.0;  // > 0: Gumbel-max sampling in float64
  double cfg_scale = 0.0;    // > 0: classifier-free guidance, cond and uncond rows in one batched forward
  uint64_t seed = 0;
  bool logits_eos_inf = false;          // never predict EOS
  bool confidence_eos_eot_inf = false;  // zero the probability of EOT (and EOS at T=0) in the confidence
  bool stop_at_eos = false;             // once EOS is committed, fill the rest with EOS and skip remaining steps
};

// What a step callback sees after each denoising step.
struct StepEvent {
  int64_t block = 0, step = 0, forwards = 0;
  const std::vector<std::vector<int32_t>>* canvas = nullptr;   // generated region of each row, masks included
  const std::vector<std::vector<int64_t>>* committed = nullptr;  // positions (in the generated region) set this step
};
// Return false to cancel the generation.
using StepCallback = std::function<bool(const StepEvent&)>;

struct GenerateResult {
  std::vector<std::vector<int32_t>> outputs;  // generated part of each row
  int64_t forwards = 0;                       // model calls (a cfg call counts once)
  double seconds = 0;
  bool cancelled = false;
};

Expected<GenerateResult> generate(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                  const GenerateParams& params, const StepCallback& on_step = {});

}  // namespace dllm
