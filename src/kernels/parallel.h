// Loops that are parallel only when worth it.
#pragma once

#include <omp.h>

#include <cstdint>

namespace dllm {

// f(i) for i in [0, n): split statically over a new parallel region's threads when `worth_it` and this thread
// is not in a region already; else here, without entering one. A parallel construct whose if() clause is
// false still builds a team of one (libgomp: a few microseconds inside another region: an RMSNorm of 896
// values took 5 us in a generated token's region, where the small steps run).
template <class F>
void parallel_for_if(bool worth_it, int64_t n, F&& f) {
  if (!worth_it || omp_in_parallel()) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace dllm
