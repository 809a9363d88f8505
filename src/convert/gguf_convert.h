// Hugging Face directory -> GGUF in llama.cpp's layout: the keys its convert_hf_to_gguf.py writes and the
// tensor names and transforms of the family's table (model/family.h; LLaDA's attn_q / attn_k rows permuted
// for llama.cpp's adjacent-pair RoPE), so the file loads in llama.cpp and back in dllm. The config is read by
// the family's own parser, so convert refuses what the loader refuses. Above model/ in the layers: it uses
// both the model descriptions and the GGUF writer. 1-D tensors stay F32; 2-D weights get the requested type,
// falling back (as llama-quantize does) where a row is not a whole number of blocks: Q4_K -> Q4_0 -> F16,
// Q6_K / Q8_0 -> F16.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace dllm {

struct ConvertProgress {
  size_t tensor = 0, tensors = 0;  // tensors written so far / in total
  uint64_t bytes = 0, total_bytes = 0;
  std::string name;  // the tensor being written
};

// A 2-D weight written in another type than asked because its rows are not whole blocks of it.
struct ConvertFallback {
  std::string tensor;  // GGUF name
  GgmlType wanted, written;
  int64_t cols = 0;  // the row length that is not a multiple of `wanted`'s block
};

struct ConvertResult {
  std::string architecture;
  size_t tensors = 0;
  uint64_t bytes = 0;
  size_t fallback_tensors = 0;  // fallbacks.size()
  std::vector<ConvertFallback> fallbacks;
  std::map<std::string, size_t> tensors_by_type;  // "Q4_0" -> how many tensors the file holds in it
};

// "145 Q4_0, 24 Q4_K, 121 F32": the real mix of a written file, most frequent first.
std::string describe_type_mix(const std::map<std::string, size_t>& by_type);

// One line per fallback, as llama-quantize says it: the tensor, its row length, the block, the type used.
std::string describe_fallback(const ConvertFallback& f);

// Parses "f32" | "f16" | "bf16" | "q8_0" | "q4_0" | "q4_k" | "q6_k" (the error lists the choices).
GgmlType parse_gguf_type(const std::string& name);

ConvertResult convert_hf_to_gguf(const std::string& hf_dir, const std::string& out_path, GgmlType type,
                                 const std::function<void(const ConvertProgress&)>& progress = {});

}  // namespace dllm
