// Editing a finished (or half-finished) canvas in context: redo spans and refine them (docs/denoising.md
// "Rewriting a span", docs/server.md "Canvas editing"). One steppable DenoiseLoop, so `dllm rewrite` and the
// server's scheduler run the same thing:
//
//   1. score (refine of spans that keep their tokens): one forward with the editable positions masked; each
//      editable token's score is the probability the model gives it there;
//   2. fill: the mask ids of the canvas are denoised with everything else as fixed context (dllm::infill's
//      loop); each committed token's score is the one it was chosen on (StepEvent::committed_scores);
//   3. refine rounds (ReMDM / RCR style): the k least confident editable tokens go back to masks and are
//      denoised again as one block, their scores replaced by the new ones.
//
// Bidirectional families (LLaDA, Dream). Block-diffusion families (LLaDA2.x, SDAR) are edited with the
// model's own editing loop instead (canvas_edit_block.cpp): LLaDA2.1's mask-to-token commits and
// token-to-token edits over the blocks that hold editable positions, a refine round being one editing pass
// per block (tokens whose new draw has p > editing_threshold are replaced; no k); a block sees only the text
// before it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "denoise/denoise_loop.h"

namespace dllm {

struct CanvasEdit {
  std::vector<int32_t> canvas;    // the whole canvas; positions to fill hold the mask id
  std::vector<uint8_t> editable;  // per position: refine may remask it (empty: the mask ids of `canvas`)
  int64_t rounds = 0;             // refine rounds after the fill
  int64_t tokens_per_round = 0;   // k; 0 = a quarter of the editable positions (at least 1)
};

// Block-diffusion families: StepEvent::block is the editing pass (0 while the block has masks), committed and
// edited are canvas positions per step; result().outputs[0] is the whole final canvas.
std::unique_ptr<DenoiseLoop> make_block_canvas_edit_loop(const ModelInfo& info, CanvasEdit edit,
                                                         const GenerateParams& params);

// Per step, StepEvent::block is the phase: 0 = score / fill, r = refine round r (StepEvent::step counts the
// steps within it); a round's last event has StepEvent::edited = the remasked positions whose token changed;
// with refine rounds, StepEvent::final_prefix ends at the first editable position. The
// result's outputs[0] is the whole final canvas. Throws dllm::Error naming what is wrong (an autoregressive
// family, nothing editable, nothing to do, a mask outside the editable positions). Block-diffusion families
// go to make_block_canvas_edit_loop.
std::unique_ptr<DenoiseLoop> make_canvas_edit_loop(const ModelInfo& info, CanvasEdit edit,
                                                   const GenerateParams& params);

// The k of a round for `editable` positions (tokens_per_round, else a quarter, at least 1, at most all).
int64_t refine_tokens_per_round(int64_t editable, int64_t tokens_per_round);

}  // namespace dllm
