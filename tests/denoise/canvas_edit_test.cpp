// Canvas editing (make_canvas_edit_loop): the fill phase is exactly dllm::infill; refine rounds remask the k
// least confident editable tokens (scored by an independent forward here) and never touch anything outside
// the editable positions; each round's last event names the positions it changed; bad edits are refused
// with the reason.
#include "denoise/canvas_edit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "denoise/denoise_loop.h"
#include "dllm/dllm.h"
#include "test_util.h"

namespace dllm {
namespace {

std::shared_ptr<Model> load_f32(const std::string& name) {
  LoadOptions o;
  o.precision = Precision::kF32;
  o.backend = test::backend();
  return Model::load(test::data_path("oracle/models/" + name), o).value();
}

// 24 positions: context, a 6-token span to fill at [6, 12), more context.
std::vector<int32_t> canvas_with_span(const ModelInfo& info) {
  std::vector<int32_t> c = {5,   17, 42, 99, 7,  3,  0,  0,  0,  0,  0,  0,
                            250, 11, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69};
  for (int i = 6; i < 12; ++i) c[i] = static_cast<int32_t>(info.mask_id);
  return c;
}

struct EditRun {
  GenerateResult result;
  std::vector<StepEvent> events;  // copies: pointers inside are not kept
  std::vector<std::set<int64_t>> committed_per_phase;
  std::vector<std::vector<int64_t>> edited_per_round;
};

EditRun run_edit(Model& model, CanvasEdit edit, const GenerateParams& p) {
  auto loop = make_canvas_edit_loop(model.info(), std::move(edit), p);
  EditRun run;
  auto r = run_denoise_loop(model, *loop, [&](const StepEvent& ev) {
    run.events.push_back(ev);

    if (run.committed_per_phase.size() <= static_cast<size_t>(ev.block))
      run.committed_per_phase.resize(ev.block + 1);
    if (ev.committed)
      for (int64_t pos : (*ev.committed)[0]) run.committed_per_phase[ev.block].insert(pos);
    if (ev.edited) run.edited_per_round.push_back((*ev.edited)[0]);
    return true;
  });
  EXPECT_TRUE(r.ok()) << r.error();
  if (r.ok()) run.result = *r;
  return run;
}

TEST(CanvasEdit, FillEqualsInfill) {
  int cases = 0;
  for (const char* name : {"llada_tiny_f32", "dream_tiny_gqa_f32"}) {
    auto model = load_f32(name);
    const std::vector<int32_t> canvas = canvas_with_span(model->info());
    for (int64_t steps : {6, 3}) {
      GenerateParams p;
      p.unmask = Unmask::kConfidence;
      p.steps = steps;
      auto fill = infill(*model, {canvas}, p);
      ASSERT_TRUE(fill.ok()) << fill.error();
      EditRun run = run_edit(*model, {canvas, {}, 0, 0}, p);
      EXPECT_EQ(run.result.outputs[0], fill->outputs[0]) << name << " steps " << steps;
      EXPECT_EQ(run.result.forwards, fill->forwards) << name;
      EXPECT_EQ(run.result.forward_tokens, fill->forward_tokens) << name;
      EXPECT_TRUE(run.edited_per_round.empty());
      ++cases;
    }
  }
  EXPECT_EQ(cases, 4);
}

TEST(CanvasEdit, RefineRoundsStayInsideTheSpan) {
  auto model = load_f32("llada_tiny_f32");
  const std::vector<int32_t> canvas = canvas_with_span(model->info());
  GenerateParams p;
  p.unmask = Unmask::kConfidence;
  p.steps = 6;
  const int64_t rounds = 3, k = 2;
  EditRun run = run_edit(*model, {canvas, {}, rounds, k}, p);
  const std::vector<int32_t>& out = run.result.outputs[0];
  ASSERT_EQ(out.size(), canvas.size());
  for (size_t i = 0; i < canvas.size(); ++i) {
    if (i >= 6 && i < 12) {
      EXPECT_NE(out[i], model->info().mask_id) << i;
    } else {
      EXPECT_EQ(out[i], canvas[i]) << "position " << i << " is outside the span";
    }
  }
  // The fill (6 steps, one token each), then `rounds` rounds of k positions, min(steps, k) steps each.
  EXPECT_EQ(run.result.forwards, 6 + rounds * k);
  ASSERT_EQ(run.committed_per_phase.size(), static_cast<size_t>(rounds + 1));
  for (int64_t r = 1; r <= rounds; ++r) {
    EXPECT_EQ(run.committed_per_phase[r].size(), static_cast<size_t>(k)) << "round " << r;
    for (int64_t pos : run.committed_per_phase[r]) EXPECT_TRUE(pos >= 6 && pos < 12) << pos;
  }
  ASSERT_EQ(run.edited_per_round.size(), static_cast<size_t>(rounds));
  for (size_t r = 0; r < run.edited_per_round.size(); ++r)
    for (int64_t pos : run.edited_per_round[r])
      EXPECT_TRUE(run.committed_per_phase[r + 1].count(pos))
          << "round " << r + 1 << " edited " << pos << " without remasking it";
  for (size_t i = 0; i < run.events.size(); ++i) {
    EXPECT_LE(run.events[i].block, rounds);
    EXPECT_EQ(run.events[i].forwards, static_cast<int64_t>(i) + 1)
        << "events count the forwards of all phases";
  }
}

// Refine of a span that keeps its tokens: the first forward scores them (editable positions masked) and the
// first round remasks the k with the lowest probability, which this test computes with its own forward.
TEST(CanvasEdit, RefineOnlyRemasksTheLeastLikelyTokens) {
  int cases = 0;
  for (const char* name : {"llada_tiny_f32", "dream_tiny_gqa_f32"}) {
    auto model = load_f32(name);
    const ModelInfo& info = model->info();
    std::vector<int32_t> canvas = canvas_with_span(info);
    const std::vector<int32_t> span = {300, 301, 7, 42, 400, 17};
    std::copy(span.begin(), span.end(), canvas.begin() + 6);
    std::vector<uint8_t> editable(canvas.size(), 0);
    std::fill(editable.begin() + 6, editable.begin() + 12, 1);

    std::vector<int32_t> masked = canvas;
    std::fill(masked.begin() + 6, masked.begin() + 12, static_cast<int32_t>(info.mask_id));
    ForwardInput in;
    in.tokens = masked;
    in.batch = 1;
    auto logits = model->forward(in);
    ASSERT_TRUE(logits.ok()) << logits.error();
    std::vector<std::pair<double, int64_t>> prob;
    for (int64_t pos = 6; pos < 12; ++pos) {
      const int64_t src = info.shift_logits ? pos - 1 : pos;
      const float* l = logits->data() + src * info.vocab_size;
      const float mx = *std::max_element(l, l + info.vocab_size);
      double sum = 0;
      for (int64_t v = 0; v < info.vocab_size; ++v) sum += std::exp(double(l[v]) - mx);
      prob.push_back({std::exp(double(l[canvas[pos]]) - mx) / sum, pos});
    }
    std::stable_sort(prob.begin(), prob.end());
    const std::set<int64_t> lowest = {prob[0].second, prob[1].second};

    GenerateParams p;
    p.unmask = Unmask::kConfidence;
    p.steps = 4;
    EditRun run = run_edit(*model, {canvas, editable, 1, 2}, p);
    EXPECT_EQ(run.result.forwards, 1 + 2) << name;  // the scoring forward + 2 steps of one token
    ASSERT_EQ(run.committed_per_phase.size(), 2u) << name;
    EXPECT_EQ(run.committed_per_phase[1], lowest) << name;
    const std::vector<int32_t>& out = run.result.outputs[0];
    for (size_t i = 0; i < canvas.size(); ++i) {
      if (!lowest.count(static_cast<int64_t>(i))) {
        EXPECT_EQ(out[i], canvas[i]) << name << " position " << i;
      }
    }
    ++cases;
  }
  EXPECT_EQ(cases, 2);
}

TEST(CanvasEdit, BadEditsAreRefusedWithTheReason) {
  auto model = load_f32("llada_tiny_f32");
  const ModelInfo& info = model->info();
  const std::vector<int32_t> canvas = canvas_with_span(info);
  GenerateParams p;
  auto refused = [&](const ModelInfo& i, CanvasEdit e, const std::string& needle) {
    try {
      make_canvas_edit_loop(i, std::move(e), p);
      ADD_FAILURE() << "accepted; expected an error with '" << needle << "'";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
  };
  std::vector<int32_t> plain = canvas;
  std::fill(plain.begin() + 6, plain.begin() + 12, 9);
  refused(info, {plain, {}, 0, 0}, "nothing to edit");
  std::vector<uint8_t> editable(canvas.size(), 0);
  editable[0] = 1;
  refused(info, {plain, editable, 0, 0}, "nothing to do");
  refused(info, {canvas, editable, 1, 0}, "is a mask but not editable");
  refused(info, {canvas, {}, -1, 0}, "refine rounds must be >= 0");
  refused(info, {canvas, std::vector<uint8_t>(3, 1), 0, 0}, "3 editable flags");
  ModelInfo ar = info;
  ar.autoregressive = true;
  ar.architecture = "qwen2";
  refused(ar, {canvas, {}, 0, 0}, "autoregressive");
}

// Block-diffusion models are edited with LLaDA2.1's own loop: redoing the generated part of a canvas (prompt
// + masks to whole blocks, the masks editable, one editing pass per refine round) is the official LLaDA2.1
// generate(), so every deterministic golden case without an EOS stop comes back token for token, with the
// reference's number of model calls (it is uncached too). Refining the result again with temperature 0 is a
// fixed point of blocks the reference ended on a pass without edits.
TEST(CanvasEdit, BlockModelsRunTheLlada21EditingLoop) {
  auto model = load_f32("llada2_tiny_f32");
  const auto cases =
      test::read_cases(test::data_path("oracle/golden/llada2_tiny_f32/generate_llada2_1.json"));
  int ran = 0;
  for (const auto& c : cases) {
    const auto& kw = c["kwargs"];
    if (!c["deterministic"].get<bool>() || kw["eos_early_stop"].get<bool>()) continue;
    SCOPED_TRACE(c["id"].get<std::string>());
    GenerateParams p;
    p.block_length = kw["block_length"];
    p.temperature = kw["temperature"];
    p.top_k = kw["top_k"].is_null() ? 0 : kw["top_k"].get<int64_t>();
    p.top_p = kw["top_p"].is_null() ? 1.0 : kw["top_p"].get<double>();
    p.block_threshold = kw["threshold"];
    p.editing_threshold = kw["editing_threshold"];
    p.num_to_transfer = kw["num_to_transfer"];
    p.eos_id = kw["eos_id"];
    p.mask_id = kw["mask_id"];
    std::vector<int32_t> canvas = c["prompt"][0].get<std::vector<int32_t>>();
    canvas.resize(c["canvas_length"].get<size_t>(), p.mask_id);
    EditRun run = run_edit(*model, {canvas, {}, kw["max_post_steps"].get<int64_t>(), 0}, p);
    EXPECT_EQ(run.result.outputs[0], c["final_canvas"].get<std::vector<int32_t>>());
    EXPECT_EQ(run.result.forwards, c["num_model_calls"].get<int64_t>());
    ++ran;
  }
  EXPECT_EQ(ran, 17);

  // Refine-only over a finished canvas: only the editable span may change; rounds are editing passes.
  const auto& c = cases[0];
  GenerateParams p;
  p.block_length = c["kwargs"]["block_length"];
  p.mask_id = c["kwargs"]["mask_id"];
  p.editing_threshold = 0.0;  // every different draw is an edit
  std::vector<int32_t> canvas = c["final_canvas"].get<std::vector<int32_t>>();
  std::vector<uint8_t> editable(canvas.size(), 0);
  std::fill(editable.begin() + 12, editable.begin() + 20, 1);
  EditRun run = run_edit(*model, {canvas, editable, 2, 0}, p);
  for (size_t i = 0; i < canvas.size(); ++i) {
    if (!editable[i]) {
      EXPECT_EQ(run.result.outputs[0][i], canvas[i]) << "position " << i;
    }
  }
  for (const StepEvent& ev : run.events) {
    EXPECT_GE(ev.block, 1) << "no masks: every pass is an editing pass";
    EXPECT_LE(ev.block, 2);
  }
  EXPECT_LE(run.result.forwards, 2 * 2) << "two blocks (8..15, 16..23), at most two passes each";

  // What the loop does not take.
  ModelInfo info = model->info();
  auto refused = [&](GenerateParams q, CanvasEdit e, const std::string& needle) {
    try {
      make_canvas_edit_loop(info, std::move(e), q);
      ADD_FAILURE() << "accepted; expected an error with '" << needle << "'";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
  };
  refused(p, {canvas, editable, 1, 3}, "refine_tokens does not apply");
  GenerateParams sdar = p;
  sdar.block_loop = BlockLoop::kSdar;
  refused(sdar, {canvas, editable, 1, 0}, "have no editing");
  refused(p, {canvas, editable, 0, 0}, "nothing to do");
}

TEST(CanvasEdit, TokensPerRound) {
  EXPECT_EQ(refine_tokens_per_round(12, 0), 3);
  EXPECT_EQ(refine_tokens_per_round(3, 0), 1);
  EXPECT_EQ(refine_tokens_per_round(5, 9), 5);
  EXPECT_EQ(refine_tokens_per_round(5, 2), 2);
}

}  // namespace
}  // namespace dllm
