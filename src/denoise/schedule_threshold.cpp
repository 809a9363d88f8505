// "How many" rule: Fast-dLLM's confidence threshold.
#include "denoise/schedule.h"

namespace dllm {

int64_t threshold_count(std::span<const double> sorted, double tau) {
  if (sorted.empty()) return 0;
  int64_t n = 1;
  while (n < static_cast<int64_t>(sorted.size()) && sorted[n] >= tau) ++n;
  return n;
}

}  // namespace dllm
