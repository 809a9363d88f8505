// Post-processors of tokenizer.json ("post_processor"), applied when add_special_tokens is true:
// TemplateProcessing (single sequence), ByteLevel (no change to ids), RobertaProcessing, BertProcessing,
// Sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tokenizer/json_path.h"

namespace dllm::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const JNode& node);

}  // namespace dllm::tok
