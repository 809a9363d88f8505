// `dllm bench` on a uniform-state canvas model (DiffusionGemma): bench_canvas.cpp.
#pragma once

#include <cstdint>

#include "dllm/dllm.h"

namespace dllm::cli {

struct CanvasBenchOptions {
  int64_t context = 512;  // prompt tokens in the encoder's cache
  int repeat = 3;         // timed decoder steps (the median is reported)
  bool generate = false;  // also a generate() at the released sampler settings
  bool json = false;
};

void run_canvas_bench(const CanvasBenchOptions& options, Model& model);

}  // namespace dllm::cli
