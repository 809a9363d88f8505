// --dtype auto|f32|bf16 resolved against what a checkpoint stores: "auto" keeps the file's precision (f32
// stays f32, bf16 and f16 stay 16-bit), as Hugging Face's dtype="auto" and llama.cpp do.
#pragma once

#include <string>
#include <vector>

#include "core/compute_type.h"
#include "dllm/dllm.h"

namespace dllm {

struct ResolvedPrecision {
  ComputeType compute = ComputeType::kF32;
  std::string reason;  // for the load line: why this precision
};

// `stored` lists the storage type name of each weight matrix ("F32", "BF16", "F16", "Q8_0", ...).
ResolvedPrecision resolve_precision(Precision requested, const std::vector<std::string>& stored);

// "f32" / "bf16".
const char* precision_name(Precision p);

}  // namespace dllm
