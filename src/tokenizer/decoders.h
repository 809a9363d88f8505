// Decoders of tokenizer.json ("decoder"): ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace,
// BPEDecoder and Sequence. They transform the list of token strings like HF's decode_chain.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_path.h"

namespace dllm::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const JNode& node);

}  // namespace dllm::tok
