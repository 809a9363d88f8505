// "How many" rule: Fast-dLLM's factor rule.
#include "denoise/schedule.h"

namespace dllm {

int64_t factor_count(std::span<const double> sorted, double factor) {
  if (sorted.empty()) return 0;
  int64_t n = 1;  // c_1 always goes
  while (n < static_cast<int64_t>(sorted.size()) && static_cast<double>(n + 2) * (1.0 - sorted[n]) < factor)
    ++n;
  return n;
}

}  // namespace dllm
