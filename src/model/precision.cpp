#include "model/precision.h"

#include <map>

namespace dllm {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kAuto:
      return "auto";
    case Precision::kF32:
      return "f32";
    case Precision::kBF16:
      return "bf16";
  }
  return "?";
}

ResolvedPrecision resolve_precision(Precision requested, const std::vector<std::string>& stored) {
  std::map<std::string, int> counts;
  for (const auto& s : stored) ++counts[s];
  std::string seen;
  for (const auto& [type, n] : counts) seen += (seen.empty() ? "" : ", ") + std::to_string(n) + " " + type;
  const std::string of_file = "the weight matrices are " + (seen.empty() ? std::string("none") : seen);
  if (requested == Precision::kF32) return {ComputeType::kF32, "requested (--dtype f32); " + of_file};
  if (requested == Precision::kBF16) return {ComputeType::kBF16, "requested (--dtype bf16); " + of_file};
  // Auto: any 16-bit matrix keeps the model 16-bit (rounding the f32 ones, if any, is the smaller change than
  // widening every 16-bit one); all-f32 stays exact; quantized-only files run their plain tensors in f32.
  if (counts.count("BF16") || counts.count("F16"))
    return {ComputeType::kBF16, "auto: " + of_file + ", kept 16-bit"};
  if (counts.count("F32")) return {ComputeType::kF32, "auto: " + of_file + ", kept f32"};
  return {ComputeType::kF32, "auto: " + of_file + ", plain tensors in f32"};
}

}  // namespace dllm
