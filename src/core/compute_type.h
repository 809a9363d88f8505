// How a matmul runs, as the kernels see it. The model layer resolves the user's choice (dllm::Precision in
// the public header, "auto" included) into one of these at load.
#pragma once

namespace dllm {

// kF32 is exact (f32 weights and activations); kBF16 keeps weights in bf16 (f16 ones are rounded to it) with
// bf16 activations and f32 accumulation where the CPU has AVX512_BF16, f32 products on the bf16 weights
// elsewhere; kF16 keeps weights in f16, as stored, with f32 activations and f32 products (each f16 weight
// widens to f32 exactly).
enum class ComputeType { kF32, kBF16, kF16 };

// What the load line and --json call it.
inline const char* compute_type_name(ComputeType c) {
  return c == ComputeType::kF32 ? "f32" : c == ComputeType::kBF16 ? "bf16" : "f16";
}

}  // namespace dllm
