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
    case Precision::kF16:
      return "f16";
  }
  return "?";
}

std::map<std::string, std::string> PrecisionTally::result() const {
  std::map<std::string, std::string> out;
  for (const auto& [type, kinds] : seen_) {
    std::string joined;
    for (const auto& k : kinds) joined += (joined.empty() ? "" : " + ") + k;
    out[type] = joined;
  }
  return out;
}

std::string precision_by_type_line(const std::map<std::string, std::string>& by_type) {
  std::string line;
  for (const auto& [type, runs_as] : by_type) line += (line.empty() ? "" : ", ") + type + " -> " + runs_as;
  return line;
}

Precision precision_of(ComputeType c) {
  switch (c) {
    case ComputeType::kF32:
      return Precision::kF32;
    case ComputeType::kBF16:
      return Precision::kBF16;
    case ComputeType::kF16:
      return Precision::kF16;
  }
  return Precision::kF32;
}

ResolvedPrecision resolve_precision(Precision requested, const std::vector<std::string>& stored) {
  std::map<std::string, int> counts;
  for (const auto& s : stored) ++counts[s];
  std::string seen;
  for (const auto& [type, n] : counts) seen += (seen.empty() ? "" : ", ") + std::to_string(n) + " " + type;
  const std::string of_file = "the weight matrices are " + (seen.empty() ? std::string("none") : seen);
  if (requested == Precision::kF32) return {ComputeType::kF32, "requested (--dtype f32); " + of_file};
  if (requested == Precision::kBF16) return {ComputeType::kBF16, "requested (--dtype bf16); " + of_file};
  if (requested == Precision::kF16) return {ComputeType::kF16, "requested (--dtype f16); " + of_file};
  // Auto: any 16-bit matrix keeps the model 16-bit (rounding the f32 ones, if any, is the smaller change than
  // widening every 16-bit one), in the 16-bit type the file holds (bf16 where it holds both: f16 cannot hold
  // bf16's range); all-f32 stays exact; quantized-only files run their plain tensors in f32.
  if (counts.count("BF16")) return {ComputeType::kBF16, "auto: " + of_file + ", kept bf16"};
  if (counts.count("F16")) return {ComputeType::kF16, "auto: " + of_file + ", kept f16"};
  if (counts.count("F32")) return {ComputeType::kF32, "auto: " + of_file + ", kept f32"};
  return {ComputeType::kF32, "auto: " + of_file + ", plain tensors in f32"};
}

}  // namespace dllm
