// The samplers' random source (denoising and autoregressive decoding): seeded, reproducible across runs and
// thread counts. (It cannot reproduce torch's CPU RNG stream, so seeded sampling matches the reference in
// distribution, not token for token.)
#pragma once

#include <cstdint>
#include <random>

namespace dllm {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  // Uniform in [0, 1) with 53 random bits, like torch.rand(dtype=float64).
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

 private:
  std::mt19937_64 engine_;
};

}  // namespace dllm
