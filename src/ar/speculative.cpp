// dllm::generate_speculative: an autoregressive verifier with a diffusion drafter (include/dllm/dllm.h says
// what it promises; docs/hybrid.md how it is used). A round drafts k tokens after the current text with the
// diffusion model, then runs the verifier once over [the previous round's last token, drafts]: row i of that
// forward predicts the token after feed[i], so every draft is checked in one forward and the verifier's own
// next token comes for free. The verifier's KV cache is rolled back past the first rejected draft.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "ar/ar_generate.h"
#include "ar/ar_session.h"
#include "ar/token_sampler.h"
#include "cache/kv_cache.h"
#include "core/error.h"
#include "core/rng.h"

namespace dllm {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Draft {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> q;  // sampling: the distribution each token was drawn from
};

// The drafter's K/V of the text so far (DraftParams::cache). The last token of the text is never cached:
// every forward re-runs it, so a Dream-style model (row i predicts position i + 1) always has the row that
// predicts the first draft.
struct DrafterCache {
  KvCache kv;
  int64_t cached = 0;  // leading text tokens whose K/V is held
};

// k tokens after `context` from the diffusion model: canvas = context + k masks, `steps` forwards, each
// committing the most confident masked positions (ties to the left; the last step all of them). Greedy takes
// each position's argmax; sampling (steps = 1) draws each position from its filtered softmax. With a cache,
// only the text not cached yet (and the masks) is run.
Draft draft_tokens(Model& drafter, const std::vector<int32_t>& context, int64_t k, int64_t steps,
                   const TokenSampling& sampling, Rng& rng, DrafterCache* cache, SpeculativeStats& stats) {
  const ModelInfo& info = drafter.info();
  const auto P = static_cast<int64_t>(context.size());
  const int64_t V = info.vocab_size, shift = info.shift_logits ? 1 : 0;
  std::vector<int32_t> canvas = context;
  canvas.resize(static_cast<size_t>(P + k), info.mask_id);
  std::vector<uint8_t> masked(static_cast<size_t>(k), 1);
  Draft d;
  d.tokens.assign(static_cast<size_t>(k), info.mask_id);
  if (sampling.temperature > 0) d.q.resize(static_cast<size_t>(k));
  for (int64_t step = 0; step < steps; ++step) {
    ForwardInput in;
    int64_t from = 0;  // the canvas position of the first token run
    if (cache) {
      from = step == 0 ? cache->cached : P - 1;
      in.cache = &cache->kv;
      in.cache_op = CacheOp::kExtend;
      in.cache_append = step == 0 ? P - 1 - cache->cached : 0;
      in.attention_block = 0;  // bidirectional over the cache and this call
    }
    in.tokens = std::span<const int32_t>(canvas).subspan(static_cast<size_t>(from));
    in.logits_from = P - shift - from;  // row j predicts position P + j (Dream: the output at P + j - 1)
    const std::vector<float> logits = drafter.forward(in).value();
    if (cache && step == 0) cache->cached = P - 1;
    ++stats.draft_forwards;
    stats.draft_positions += static_cast<int64_t>(in.tokens.size());
    std::vector<int64_t> open;
    std::vector<double> confidence(static_cast<size_t>(k), 0);
    std::vector<int32_t> pick(static_cast<size_t>(k), 0);
    std::vector<float> probs(static_cast<size_t>(V));
    for (int64_t j = 0; j < k; ++j) {
      if (!masked[j]) continue;
      open.push_back(j);
      const std::span<const float> row(logits.data() + j * V, static_cast<size_t>(V));
      if (sampling.temperature > 0) {
        token_probabilities(row, sampling, probs);
        pick[j] = sample_token(row, sampling, rng);
        d.q[j] = probs;
      } else {
        pick[j] = argmax_token(row);
        token_probabilities(row, {1.0, 0, 1.0}, probs);
      }
      confidence[j] = probs[pick[j]];
    }
    const auto remaining = static_cast<int64_t>(open.size());
    const int64_t commit = step + 1 == steps ? remaining : (remaining + (steps - step) - 1) / (steps - step);
    std::stable_sort(open.begin(), open.end(),
                     [&](int64_t a, int64_t b) { return confidence[a] > confidence[b]; });
    for (int64_t i = 0; i < commit; ++i) {
      const int64_t j = open[i];
      masked[j] = 0;
      d.tokens[j] = canvas[P + j] = pick[j];
    }
  }
  return d;
}

// One token from max(0, p - q) renormalised (the speculative-sampling correction); p where q covers p.
int32_t sample_residual(const std::vector<float>& p, const std::vector<float>& q, Rng& rng) {
  std::vector<double> r(p.size());
  double sum = 0;
  for (size_t v = 0; v < p.size(); ++v) sum += r[v] = std::max(0.0, static_cast<double>(p[v]) - q[v]);
  if (!(sum > 0)) {  // p == q: any draw from p is exact
    sum = 0;
    for (size_t v = 0; v < p.size(); ++v) sum += r[v] = p[v];
  }
  const double u = rng.uniform() * sum;
  double cum = 0;
  size_t last = 0;
  for (size_t v = 0; v < r.size(); ++v) {
    if (r[v] <= 0) continue;
    last = v;
    cum += r[v];
    if (u < cum) break;
  }
  return static_cast<int32_t>(last);
}

void check_pair(const Model& verifier, const Model& drafter, const DraftParams& draft,
                const GenerateParams& p) {
  const ModelInfo &v = verifier.info(), &d = drafter.info();
  if (!v.autoregressive)
    fail(v.path, ": speculative decoding verifies with an autoregressive model; ", v.architecture,
         " is a diffusion model");
  if (d.autoregressive)
    fail(d.path, ": the drafter must be a diffusion model; ", d.architecture, " is autoregressive");
  if (d.block_size > 0)
    fail(d.path, ": ", d.architecture,
         " is a block-diffusion model; drafting uses bidirectional models (LLaDA, Dream)");
  if (d.mask_id < 0) fail(d.path, ": the drafter has no [MASK] id");
  if (d.vocab_size != v.vocab_size)
    fail("the drafter's vocabulary (", d.vocab_size, " ids, ", d.path, ") differs from the verifier's (",
         v.vocab_size, " ids, ", v.path, "): the two models must share a tokenizer");
  if (draft.tokens < 1) fail("draft tokens (--draft-tokens) must be >= 1, got ", draft.tokens);
  if (draft.steps < 1 || draft.steps > draft.tokens)
    fail("draft steps (--draft-steps) must be in [1, draft tokens = ", draft.tokens, "], got ", draft.steps);
  if (p.temperature > 0 && draft.steps != 1)
    fail(
        "sampling (temperature > 0) with a drafter needs --draft-steps 1: a token drafted in a later step "
        "depends "
        "on drafts to its right, so its probability is not the one the acceptance rule needs");
}

}  // namespace

Expected<GenerateResult> generate_speculative(Model& verifier, Model& drafter,
                                              const std::vector<std::vector<int32_t>>& prompts,
                                              const GenerateParams& params, const DraftParams& draft,
                                              const StepCallback& on_step, SpeculativeStats* stats_out) {
  return capture([&] {
    check_pair(verifier, drafter, draft, params);
    reject_diffusion_settings(verifier.info(), params);
    if (prompts.empty()) fail("generate: no prompts");
    const auto start = Clock::now();
    const std::vector<int32_t> stop = autoregressive_stop_ids(verifier.info(), params);
    const TokenSampling sampling{params.temperature, params.top_k, params.top_p};
    const bool greedy = params.temperature <= 0;
    const int64_t V = verifier.info().vocab_size;
    SpeculativeStats stats;
    GenerateResult result;
    for (size_t row = 0; row < prompts.size() && !result.cancelled; ++row) {
      const auto& prompt = prompts[row];
      if (prompt.empty()) fail("generate: prompt ", row, " is empty");
      Rng rng(params.seed + row);
      ArSession session(verifier);
      DrafterCache drafter_cache;
      auto t = Clock::now();
      std::vector<float> next_logits = session.advance(prompt);  // predicts the token after the prompt
      stats.verify_seconds += seconds_since(t);
      std::vector<int32_t> context = prompt, out, pending;  // pending: emitted, not yet run by the verifier
      std::vector<std::vector<int32_t>> canvas(1);
      std::vector<std::vector<int64_t>> committed(1);
      std::vector<int64_t> final_prefix(1);
      bool done = false;
      // Emits one token: event, stop and length checks. Returns false once the row is finished.
      auto emit = [&](int32_t token) {
        out.push_back(token);
        context.push_back(token);
        if (on_step) {
          canvas[0] = out;
          committed[0] = {static_cast<int64_t>(out.size()) - 1};
          final_prefix[0] = static_cast<int64_t>(out.size());
          StepEvent ev;
          ev.step = static_cast<int64_t>(out.size()) - 1;
          ev.forwards = stats.draft_forwards + stats.verify_forwards + session.forwards();
          ev.canvas = &canvas;
          ev.committed = &committed;
          ev.row = static_cast<int64_t>(row);
          ev.final_prefix = &final_prefix;
          if (!on_step(ev)) result.cancelled = true;
        }
        done = result.cancelled || std::find(stop.begin(), stop.end(), token) != stop.end() ||
               static_cast<int64_t>(out.size()) >= params.gen_length;
        return !done;
      };
      while (!done) {
        // Draft at most what is still wanted, keeping one token for the verifier's own.
        const int64_t k =
            std::min<int64_t>(draft.tokens, params.gen_length - static_cast<int64_t>(out.size()) - 1);
        Draft d;
        if (k > 0) {
          t = Clock::now();
          d = draft_tokens(drafter, context, k, std::min(draft.steps, k), sampling, rng,
                           draft.cache ? &drafter_cache : nullptr, stats);
          stats.draft_seconds += seconds_since(t);
        }
        std::vector<int32_t> feed = pending;
        feed.insert(feed.end(), d.tokens.begin(), d.tokens.end());
        std::vector<float> rows;
        const int64_t held = session.length();
        if (!feed.empty()) {
          t = Clock::now();
          rows = session.advance(feed, static_cast<int64_t>(feed.size()));
          stats.verify_seconds += seconds_since(t);
        }
        // Prediction j (0-based) is the verifier's distribution for the position of draft j.
        auto prediction = [&](int64_t j) -> std::span<const float> {
          if (pending.empty() && j == 0) return next_logits;
          const int64_t r = j - (pending.empty() ? 1 : 0);
          return {rows.data() + r * V, static_cast<size_t>(V)};
        };
        int64_t accepted = 0;
        int32_t extra = -1;
        std::vector<float> p(static_cast<size_t>(V));
        for (; accepted < k; ++accepted) {
          const int32_t token = d.tokens[accepted];
          const auto logits = prediction(accepted);
          if (greedy) {
            const int32_t want = argmax_token(logits);
            if (token == want) continue;
            extra = want;
            break;
          }
          token_probabilities(logits, sampling, p);
          const double q = d.q[accepted][token];
          if (q > 0 && rng.uniform() < std::min(1.0, p[token] / q)) continue;
          extra = sample_residual(p, d.q[accepted], rng);
          break;
        }
        if (extra < 0) extra = sample_token(prediction(k), sampling, rng);  // every draft kept: one more
        stats.rounds += k > 0;
        stats.drafted += k;
        stats.accepted += accepted;
        // The verifier keeps pending + the accepted drafts; the extra token is run next round.
        session.truncate(held + static_cast<int64_t>(pending.size()) + accepted);
        pending = {extra};
        for (int64_t j = 0; j < accepted && !done; ++j) emit(d.tokens[j]);
        if (!done) emit(extra);
      }
      result.outputs.push_back(out);
      stats.verify_forwards += session.forwards();
      result.forwards += session.forwards();
      result.forward_tokens += session.forward_tokens();
    }
    result.forwards += stats.draft_forwards;
    result.seconds = seconds_since(start);
    if (stats_out) *stats_out = stats;
    return result;
  });
}

}  // namespace dllm
