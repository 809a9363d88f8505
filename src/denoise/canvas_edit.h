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
// Bidirectional families only (a block-causal model cannot see the text after a span).
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

// Per step, StepEvent::block is the phase: 0 = score / fill, r = refine round r (StepEvent::step counts the
// steps within it); a round's last event has StepEvent::edited = the remasked positions whose token changed;
// with refine rounds, StepEvent::final_prefix ends at the first editable position. The
// result's outputs[0] is the whole final canvas. Throws dllm::Error naming what is wrong (a block-diffusion
// or autoregressive family, nothing editable, nothing to do, a mask outside the editable positions).
std::unique_ptr<DenoiseLoop> make_canvas_edit_loop(const ModelInfo& info, CanvasEdit edit,
                                                   const GenerateParams& params);

// The k of a round for `editable` positions (tokens_per_round, else a quarter, at least 1, at most all).
int64_t refine_tokens_per_round(int64_t editable, int64_t tokens_per_round);

}  // namespace dllm
