// LogitStats of rows of logits on the host, in double: the CPU backend's reduction and Model::forward_stats'
// default, and what the device reductions are tested against.
#pragma once

#include <cstdint>

#include "dllm/dllm.h"

namespace dllm {

// out[r] for each of `rows` rows of `vocab` logits (row-major), rows in parallel.
void logit_stats_host(const float* logits, int64_t rows, int64_t vocab, LogitStats* out);

}  // namespace dllm
