// How many masked positions to commit per step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dllm {

// LLaDA's get_num_transfer_tokens: `masked // steps` per step, the first `masked % steps` steps get one more.
std::vector<int64_t> uniform_transfer_counts(int64_t masked, int64_t steps);

}  // namespace dllm
