// --dtype auto|f32|bf16|f16 resolved against what a checkpoint stores: "auto" keeps the file's precision (f32
// stays f32, bf16 stays bf16, f16 stays f16), as Hugging Face's dtype="auto" and llama.cpp do.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/compute_type.h"
#include "dllm/dllm.h"
#include "kernels/matmul.h"

namespace dllm {

struct ResolvedPrecision {
  ComputeType compute = ComputeType::kF32;
  std::string reason;  // for the load line: why this precision
};

// `stored` lists the storage type name of each weight matrix ("F32", "BF16", "F16", "Q8_0", ...).
ResolvedPrecision resolve_precision(Precision requested, const std::vector<std::string>& stored);

// "f32" / "bf16" / "f16" ("auto" for kAuto).
const char* precision_name(Precision p);

// Precision::kF32 / kBF16 / kF16 for a resolved compute type.
Precision precision_of(ComputeType c);

// What each stored type's weight matrices run as (ModelInfo::precision_by_type), gathered as a loader builds
// them: from the matrices themselves, so the record cannot drift from what runs.
class PrecisionTally {
 public:
  void add(const std::string& stored_type, const MatMul& m) { seen_[stored_type].insert(m.runs_as()); }
  // Per stored type, its matrices' kinds joined by " + " (a router kept in f32 beside f16 matrices).
  std::map<std::string, std::string> result() const;

 private:
  std::map<std::string, std::set<std::string>> seen_;
};

// "F16 -> f16, F32 -> f32": the load line's summary of a precision_by_type map.
std::string precision_by_type_line(const std::map<std::string, std::string>& by_type);

}  // namespace dllm
