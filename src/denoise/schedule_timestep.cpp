// "How many" rule: Dream's timestep schedule, k = int(masked * (1 - s/t)) over t = linspace(1, eps, steps +
// 1).
#include <cmath>

#include "denoise/schedule.h"

namespace dllm {

std::vector<float> dream_timesteps(int64_t steps, double eps) {
  // torch's CPU linspace kernel (ATen RangeFactoriesKernel, AVX2 build, as the oracle ran): whole pairs of
  // 8-lane vectors get lanes base + j*step (j*step rounded on its own), base = start + step*idx for the first
  // half and end - step*(n-1-idx) for the second (each one fused multiply-add); the tail is scalar, fused
  // too. The values differ from the naive formula in the last bit, which can move Dream's truncated transfer
  // counts.
  const int64_t n = steps + 1;
  const float start = 1.0f, end = static_cast<float>(eps);
  if (n == 1) return {start};
  const float step = (end - start) / static_cast<float>(n - 1);
  const int64_t halfway = n / 2;
  auto at = [&](int64_t idx) {
    return idx < halfway ? std::fma(step, static_cast<float>(idx), start)
                         : std::fma(-step, static_cast<float>(n - idx - 1), end);
  };
  constexpr int64_t kLanes = 8;
  std::vector<float> t;
  int64_t idx = 0;
  for (; idx + 2 * kLanes <= n; idx += 2 * kLanes)
    for (int64_t v = idx; v < idx + 2 * kLanes; v += kLanes) {
      const float base = at(v);
      for (int64_t j = 0; j < kLanes; ++j) {
        volatile float lane = static_cast<float>(j) * step;  // rounded on its own: no contraction into an FMA
        t.push_back(base + lane);
      }
    }
  for (; idx < n; ++idx) t.push_back(at(idx));
  return t;
}

int64_t timestep_transfer_count(float mean_masked, float t, float s, bool last_step) {
  if (last_step) return static_cast<int64_t>(mean_masked);
  const float ratio = 1.0f - s / t;
  return static_cast<int64_t>(mean_masked * ratio);
}

}  // namespace dllm
