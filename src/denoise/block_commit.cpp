#include "denoise/block_commit.h"

#include <algorithm>

namespace dllm {

std::vector<int64_t> commit_topk(std::span<const double> p, std::span<const uint8_t> active, int64_t n) {
  std::vector<int64_t> cand;
  for (size_t i = 0; i < active.size(); ++i)
    if (active[i]) cand.push_back(static_cast<int64_t>(i));
  const int64_t k = std::min<int64_t>(std::max<int64_t>(n, 0), static_cast<int64_t>(cand.size()));
  // Most probable first, ties to the lower position.
  std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  cand.resize(static_cast<size_t>(k));
  std::sort(cand.begin(), cand.end());
  return cand;
}

std::vector<int64_t> commit_threshold_topk(std::span<const double> p, std::span<const uint8_t> active,
                                           double threshold, int64_t n) {
  std::vector<int64_t> high;
  for (size_t i = 0; i < active.size(); ++i)
    if (active[i] && p[i] > threshold) high.push_back(static_cast<int64_t>(i));
  if (static_cast<int64_t>(high.size()) >= n) return high;
  return commit_topk(p, active, n);
}

std::vector<int64_t> commit_sequential(std::span<const uint8_t> active, int64_t n) {
  std::vector<int64_t> out;
  const auto first = std::find(active.begin(), active.end(), uint8_t{1});
  if (first == active.end()) return out;
  const int64_t lo = first - active.begin();
  const int64_t hi = std::min<int64_t>(lo + std::max<int64_t>(n, 0), static_cast<int64_t>(active.size()));
  for (int64_t i = lo; i < hi; ++i)
    if (active[i]) out.push_back(i);
  return out;
}

std::vector<int64_t> t2t_edits(std::span<const int32_t> current, std::span<const int32_t> drawn,
                               std::span<const double> p, std::span<const uint8_t> editable,
                               double editing_threshold) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < editable.size(); ++i)
    if (editable[i] && p[i] > editing_threshold && drawn[i] != current[i])
      out.push_back(static_cast<int64_t>(i));
  return out;
}

std::vector<int64_t> transfer_schedule(int64_t block_length, int64_t steps) {
  if (steps <= 0) return {};
  std::vector<int64_t> n(static_cast<size_t>(steps), block_length / steps);
  for (int64_t i = 0; i < block_length % steps; ++i) ++n[i];
  return n;
}

}  // namespace dllm
