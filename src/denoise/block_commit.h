// The commit rules of the block-diffusion loops, on one block: which positions (block indices, ascending)
// take their drawn token this step. `p` is the drawn token's probability per block position, `active` marks
// the masked positions (the candidates). Pure functions, tested on their own
// (tests/denoise/block_loops_test.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dllm {

// LLaDA2.0 / LLaDA2.1 M2T / SDAR low_confidence_dynamic: high = active & p > threshold (strict); if
// count(high) >= n, all of high (possibly none when n = 0); else the min(n, #active) most probable active
// ones.
std::vector<int64_t> commit_threshold_topk(std::span<const double> p, std::span<const uint8_t> active,
                                           double threshold, int64_t n);

// SDAR low_confidence_static: the min(n, #active) most probable active positions. (The reference's topk(n)
// also takes unmasked positions when n exceeds the masks left and overwrites them: we do not.)
std::vector<int64_t> commit_topk(std::span<const double> p, std::span<const uint8_t> active, int64_t n);

// SDAR sequential: [first active, first active + n) within the block, active positions only.
std::vector<int64_t> commit_sequential(std::span<const uint8_t> active, int64_t n);

// LLaDA2.1 T2T: editable & p > editing_threshold (strict) & drawn != current.
std::vector<int64_t> t2t_edits(std::span<const int32_t> current, std::span<const int32_t> drawn,
                               std::span<const double> p, std::span<const uint8_t> editable,
                               double editing_threshold);

// get_num_transfer_tokens(block_length, steps): block_length // steps each, the first block_length % steps
// + 1.
std::vector<int64_t> transfer_schedule(int64_t block_length, int64_t steps);

}  // namespace dllm
