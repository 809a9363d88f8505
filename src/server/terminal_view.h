// `dllm generate --visual`: the canvas redrawn in place in a terminal after every denoising step (masks
// dimmed, tokens committed in the latest step highlighted), with a status line.
#pragma once

#include <chrono>
#include <cstdio>

#include "dllm/dllm.h"
#include "server/text_codec.h"

namespace dllm::server {

class TerminalView {
 public:
  TerminalView(const TextCodec& codec, std::FILE* out);
  // Redraws the frame of this step over the previous one.
  void draw(const StepEvent& ev);
  // Erases the last frame (the caller prints the final text in its place).
  void erase();

 private:
  int columns() const;
  const TextCodec& codec_;
  std::FILE* out_;
  int rows_ = 0;  // terminal rows the last frame took
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dllm::server
