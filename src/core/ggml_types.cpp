#include "core/ggml_types.h"

#include <iterator>

#include "core/error.h"

namespace dllm {

namespace {

constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::kF32, "F32", 1, 4},       {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kBF16, "BF16", 1, 2},     {GgmlType::kQ8_0, "Q8_0", 32, 34},
    {GgmlType::kQ4_0, "Q4_0", 32, 18},   {GgmlType::kQ4_K, "Q4_K", 256, 144},
    {GgmlType::kQ6_K, "Q6_K", 256, 210},
};

// ggml.h's enum ggml_type, for messages about types dllm does not read ("" = retired or unknown id).
constexpr std::string_view kTypeNames[] = {
    "F32",    "F16",   "Q4_0",  "Q4_1",   "",      "",      "Q5_0",    "Q5_1",   "Q8_0",    "Q8_1",
    "Q2_K",   "Q3_K",  "Q4_K",  "Q5_K",   "Q6_K",  "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
    "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8",    "I16",   "I32",     "I64",    "F64",     "IQ1_M",
    "BF16",   "",      "",      "",       "TQ1_0", "TQ2_0", "",        "",       "",        "MXFP4",
};

}  // namespace

std::span<const GgmlTypeInfo> ggml_supported_types() {
  return kTypes;
}

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

std::string_view ggml_type_name(uint32_t id) {
  return id < std::size(kTypeNames) ? kTypeNames[id] : std::string_view{};
}

size_t ggml_row_bytes(GgmlType type, int64_t n) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info) fail("ggml type ", static_cast<uint32_t>(type), " is not supported");
  if (n < 0 || n % info->block_elems != 0)
    fail("a row of ", n, " elements is not a whole number of ", info->name, " blocks of ", info->block_elems);
  return static_cast<size_t>(n / info->block_elems) * info->block_bytes;
}

}  // namespace dllm
