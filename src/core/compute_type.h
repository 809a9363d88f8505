// How a matmul runs, as the kernels see it. The model layer resolves the user's choice (dllm::Precision in
// the public header, "auto" included) into one of these at load.
#pragma once

namespace dllm {

// kF32 is exact (f32 weights and activations); kBF16 keeps weights in 16 bits (bf16, or f16 when stored so)
// with bf16 activations and f32 accumulation where the CPU has AVX512_BF16, f32 products on the 16-bit
// weights elsewhere.
enum class ComputeType { kF32, kBF16 };

}  // namespace dllm
