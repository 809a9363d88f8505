// The parts of the HF -> GGUF converter that each architecture's writer shares (gguf_convert.cpp defines
// them): the file type, the weight type with its fallback for rows that are not whole blocks, the vocabulary
// keys.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "convert/gguf_convert.h"
#include "io/checkpoint.h"
#include "io/gguf_writer.h"
#include "model/family.h"

namespace dllm {

namespace convert_parts {

// What the GGUF metadata needs beyond the Transformer's config: the family's conventions for the vocabulary.
struct HfModel {
  const Family* family = nullptr;
  TransformerConfig config;
};

uint32_t file_type_of(GgmlType t);                  // general.file_type of a file of `t` weights
std::string type_name(GgmlType t);                  // "Q4_K"
GgmlType weight_type(GgmlType want, int64_t cols);  // `want`, or the fallback where rows are not whole blocks
// Writes the tensors added to `w` to `path`: fill(i, out) writes tensor i's tensor_bytes(i) bytes, progress
// is reported before each tensor and at the end; then result's totals (tensors, bytes, fallback count, the
// count per written type).
void write_tensors(const GgufWriter& w, const std::string& path, const std::vector<std::string>& names,
                   const std::vector<GgmlType>& types, const std::function<void(size_t, uint8_t*)>& fill,
                   const std::function<void(const ConvertProgress&)>& progress, ConvertResult& result);
// tokenizer.json (when the directory has one) as llama.cpp's tokenizer.ggml.* keys.
void write_tokenizer(GgufWriter& w, const std::string& dir, const HfModel& hf);

}  // namespace convert_parts

// DiffusionGemma's directory -> GGUF (diffusion_gemma_convert.cpp; docs/gguf.md "DiffusionGemma").
ConvertResult convert_diffusion_gemma(Checkpoint& ck, const std::string& out_path, GgmlType type,
                                      const std::function<void(const ConvertProgress&)>& progress);

}  // namespace dllm
