#include "backend/logit_stats.h"

#include <cmath>
#include <limits>

namespace dllm {

void logit_stats_host(const float* logits, int64_t rows, int64_t vocab, LogitStats* out) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * vocab;
    // Top two values, the first index of the largest (a tie at the top leaves a margin of 0).
    double top = -std::numeric_limits<double>::infinity(), second = top;
    int64_t arg = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      if (x[v] > top) {
        second = top;
        top = x[v];
        arg = v;
      } else if (x[v] > second) {
        second = x[v];
      }
    }
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(x[v] - top);
    double h = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double q = std::exp(x[v] - top) / sum;
      h += q * std::log(q + 1e-10);
    }
    LogitStats& s = out[r];
    s.argmax = static_cast<int32_t>(arg);
    s.p_max = static_cast<float>(1.0 / sum);
    s.margin = static_cast<float>((1.0 - std::exp(second - top)) / sum);
    s.neg_entropy = static_cast<float>(h);
  }
}

}  // namespace dllm
