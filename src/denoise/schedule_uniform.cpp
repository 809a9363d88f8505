// "How many" rule: uniform per block (LLaDA get_num_transfer_tokens).
#include "denoise/schedule.h"

namespace dllm {

std::vector<int64_t> uniform_transfer_counts(int64_t masked, int64_t steps) {
  std::vector<int64_t> counts(static_cast<size_t>(steps), masked / steps);
  for (int64_t i = 0; i < masked % steps; ++i) ++counts[i];
  return counts;
}

}  // namespace dllm
