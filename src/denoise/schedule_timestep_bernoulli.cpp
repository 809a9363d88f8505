// "How many" rule: Dream alg=origin, each masked position independently with probability 1 - s/t (the draw
// itself is sample_bernoulli).
#include "denoise/schedule.h"

namespace dllm {

float timestep_bernoulli_probability(float t, float s, bool last_step) {
  return last_step ? 1.0f : 1.0f - s / t;
}

}  // namespace dllm
