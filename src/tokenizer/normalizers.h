// Normalizers of tokenizer.json ("normalizer"): NFC/NFD/NFKC/NFKD, Prepend, Replace, Strip, Sequence.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/json_path.h"

namespace dllm::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites s (valid UTF-8) in place.
  virtual void normalize(std::string& s) const = 0;
};

// Builds the normalizer described at `node`; unsupported types are an error naming the type and path.
std::unique_ptr<Normalizer> make_normalizer(const JNode& node);

// Replaces every occurrence of `from` in s with `to`.
void replace_all(std::string& s, std::string_view from, std::string_view to);

}  // namespace dllm::tok
