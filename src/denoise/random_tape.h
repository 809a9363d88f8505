// Where the uniform-state loop (denoise/uniform_state.h) takes its random draws from: a RandomTape (the
// reference's recorded torch.randint / torch.multinomial results, replayed in call order) or dllm's Rng. A
// tape entry of the wrong shape or an id outside the vocabulary, and a tape that runs out, are errors that
// say which entry: a replay that silently fell back to the Rng would no longer be a replay.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"
#include "dllm/dllm.h"

namespace dllm {

class UniformDraws {
 public:
  // tape may be null (every draw from the Rng seeded with `seed`); canvases are [batch][length] over `vocab`.
  UniformDraws(const RandomTape* tape, uint64_t seed, int64_t batch, int64_t length, int64_t vocab);

  // A canvas of uniform random ids [batch * length]: randint(0, vocab) (the next tape_randint entry).
  std::vector<int32_t> uniform_canvas();
  // Whether sample canvases come from the tape (tape_samples) rather than from the probabilities.
  bool samples_on_tape() const { return tape_ != nullptr; }
  // The next tape_samples entry [batch * length].
  std::vector<int32_t> sample_canvas();
  // Exp(1) variates for one row's multinomial draw (sample = argmax p / q, as torch's CPU multinomial).
  void exponential(std::span<float> q);

 private:
  std::vector<int32_t> take(const std::vector<std::vector<std::vector<int32_t>>>& entries, size_t& next,
                            const char* key);

  const RandomTape* tape_;
  Rng rng_;
  int64_t batch_, length_, vocab_;
  size_t next_randint_ = 0, next_sample_ = 0;
};

}  // namespace dllm
