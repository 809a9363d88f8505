// BlockDenoiser: the settings, the plan of each forward, and the per-block control flow of the three loops.
// The commit rules are block_commit.cpp, the token draw block_sample.cpp.
#include "denoise/block_denoiser.h"

#include <algorithm>

#include "core/error.h"
#include "denoise/block_commit.h"

namespace dllm {

namespace {

const char* loop_name(BlockLoop l) {
  return l == BlockLoop::kLlada20 ? "LLaDA2.0" : l == BlockLoop::kLlada21 ? "LLaDA2.1" : "SDAR";
}

}  // namespace

BlockSettings resolve_block_settings(const ModelInfo& model_info, const GenerateParams& p) {
  const ModelInfo info = with_token_overrides(model_info, p);  // GenerateParams::mask_id / eos_id
  if (info.block_size <= 0)
    fail("generate: ", info.architecture, " is not a block-diffusion family (no block-causal attention)");
  BlockSettings s;
  s.loop = p.block_loop != BlockLoop::kDefault ? p.block_loop
           : info.architecture == "sdar"       ? BlockLoop::kSdar
                                               : BlockLoop::kLlada21;
  const bool sdar = s.loop == BlockLoop::kSdar;
  const std::string where = std::string("generate (") + loop_name(s.loop) + " loop): ";
  if (p.cfg_scale > 0)
    fail(where, "cfg_scale is not offered for block-diffusion loops (got ", p.cfg_scale, ")");
  if (p.remasking == Remasking::kRandom) fail(where, "remasking 'random' is LLaDA's; not offered here");
  if (p.logits_eos_inf || p.confidence_eos_eot_inf)
    fail(where, "logits_eos_inf / confidence_eos_eot_inf are LLaDA generate()'s options; not offered here");
  if (p.stop_at_eos) fail(where, "stop_at_eos is not offered (LLaDA2: eos_early_stop; SDAR: stop_ids)");
  if (p.alg_temp > 0) fail(where, "alg_temp is Dream's; not offered here");
  if (p.cache_refresh > 0)
    fail(where, "cache_refresh is for the prefix / dual caches; the block cache is exact");
  if (p.sampler == Sampler::kGumbel)
    fail(where, "the gumbel sampler is LLaDA's; block loops draw from the filtered softmax (categorical)");
  if (p.temperature < 0) fail(where, "temperature must be >= 0, got ", p.temperature);
  if (!(p.top_p > 0 && p.top_p <= 1)) fail(where, "top_p must be in (0, 1], got ", p.top_p);
  if (p.gen_length <= 0) fail(where, "gen_length must be > 0, got ", p.gen_length);
  if (p.block_length < 0) fail(where, "block_length must be >= 0, got ", p.block_length);
  if (p.steps < 0) fail(where, "steps must be >= 0, got ", p.steps);

  // Which positions and how many: the loops' own rules.
  const Unmask u = p.unmask;
  const Transfer t = p.transfer;
  const bool confidence = u == Unmask::kDefault || u == Unmask::kConfidence;
  if (sdar) {
    const bool fixed = t == Transfer::kDefault || t == Transfer::kUniform;
    if (u == Unmask::kSequential && fixed) {
      s.remasking = SdarRemasking::kSequential;
    } else if ((u == Unmask::kLowConfidenceStatic && fixed) ||
               (u == Unmask::kConfidence && t == Transfer::kUniform)) {
      s.remasking = SdarRemasking::kLowConfidenceStatic;
    } else if ((u == Unmask::kLowConfidenceDynamic || confidence) &&
               (t == Transfer::kDefault || t == Transfer::kThreshold)) {
      s.remasking = SdarRemasking::kLowConfidenceDynamic;
    } else {
      fail(
          where,
          "remasking is sequential, low_confidence_static or low_confidence_dynamic (the threshold goes with "
          "the dynamic one only); margin, entropy, random and the Dream / factor schedules are not offered");
    }
  } else {
    if (!confidence)
      fail(where,
           "positions are revealed by confidence (threshold, then a top-k fallback); unmask 'sequential', ",
           "margin, entropy and random are not offered");
    if (t != Transfer::kDefault && t != Transfer::kThreshold)
      fail(where,
           "the commit rule is the threshold with a top-k fallback (low_confidence_dynamic); schedule ",
           "uniform / timestep / factor are not offered");
  }

  // What is recomputed.
  if (p.cache == CacheMode::kPrefix || p.cache == CacheMode::kDual)
    fail(where,
         "the prefix / dual caches are Fast-dLLM's for bidirectional models; block-diffusion models take ",
         "cache 'block' (the default, exact) or 'none' (the reference's uncached loop)");
  s.cached = p.cache != CacheMode::kNone;

  s.block_length = p.block_length > 0 ? p.block_length : info.block_size;
  s.gen_length = p.gen_length;
  s.threshold = p.block_threshold > 0 ? p.block_threshold : sdar ? 0.85 : 0.95;
  if (!(s.threshold >= 0 && s.threshold <= 1)) fail(where, "threshold must be in [0, 1], got ", s.threshold);
  s.editing_threshold = p.editing_threshold;
  if (!(s.editing_threshold >= 0)) fail(where, "editing_threshold must be >= 0, got ", s.editing_threshold);
  s.max_post_steps = p.max_post_steps;
  if (s.max_post_steps < 0) fail(where, "max_post_steps must be >= 0, got ", s.max_post_steps);
  s.num_to_transfer = p.num_to_transfer;
  if (s.num_to_transfer < 1) fail(where, "num_to_transfer must be >= 1, got ", s.num_to_transfer);
  if (p.minimal_topk < 1) fail(where, "minimal_topk must be >= 1, got ", p.minimal_topk);
  s.eos_early_stop = p.eos_early_stop;
  if (sdar) {
    s.steps = p.steps > 0 ? p.steps : s.block_length;
  } else {
    s.steps = std::min<int64_t>(p.steps > 0 ? p.steps : 32, p.gen_length / p.minimal_topk);
  }
  s.schedule = transfer_schedule(s.block_length, s.steps);
  if (p.stop_ids) {
    s.stop_ids = *p.stop_ids;
  } else {
    if (info.eos_id >= 0) s.stop_ids.push_back(info.eos_id);
    if (info.eot_id >= 0 && info.eot_id != info.eos_id) s.stop_ids.push_back(info.eot_id);
  }
  s.sampling.temperature = p.temperature;
  s.sampling.top_k = std::max<int64_t>(p.top_k, 0);
  s.sampling.top_p = p.top_p;
  s.sampling.greedy_raw_confidence = s.loop == BlockLoop::kLlada21;
  return s;
}

BlockDenoiser::BlockDenoiser(const ModelInfo& info, const std::vector<int32_t>& prompt,
                             const GenerateParams& params, int64_t row)
    : info_(with_token_overrides(info, params)),
      s_(resolve_block_settings(info, params)),
      row_(row),
      rng_(params.seed + static_cast<uint64_t>(row) * 0x9E3779B97F4A7C15ull) {
  B_ = s_.block_length;
  P_ = static_cast<int64_t>(prompt.size());
  num_blocks_ = (P_ + s_.gen_length + B_ - 1) / B_;
  T_ = num_blocks_ * B_;
  x_.assign(static_cast<size_t>(T_), info_.mask_id);
  std::copy(prompt.begin(), prompt.end(), x_.begin());
  committed_.resize(1);
  edited_.resize(1);
  event_canvas_.resize(1);
  block_ = P_ / B_;
  if (s_.cached && block_ > 0) {
    phase_ = Phase::kPrefill;
  } else {
    start_block();
    advance();
  }
}

void BlockDenoiser::start_block() {
  phase_ = Phase::kDenoise;
  iter_ = post_steps_ = 0;
  block_over_ = false;
}

bool BlockDenoiser::block_has_mask() const {
  const auto lo = x_.begin() + block_ * B_;
  return std::find(lo, lo + B_, info_.mask_id) != lo + B_;
}

bool BlockDenoiser::block_wants_forward() {
  const bool mask = block_has_mask();
  switch (s_.loop) {
    case BlockLoop::kLlada21:
      if (block_over_) return false;
      if (!mask) ++post_steps_;
      if (post_steps_ > s_.max_post_steps) return false;
      // A safety cap that the reference lacks: a step with masks commits at least one, so B + max_post_steps
      // iterations are enough unless a draw wrote the mask id back.
      return iter_ < B_ + s_.max_post_steps;
    default:  // LLaDA2.0: at most `steps` iterations; SDAR: denoising_steps, then the store
      return mask && iter_ < static_cast<int64_t>(s_.schedule.size());
  }
}

void BlockDenoiser::advance() {
  while (!done_ && phase_ == Phase::kDenoise && !block_wants_forward()) end_block();
}

void BlockDenoiser::end_block() {
  const int64_t end = (block_ + 1) * B_;
  auto holds = [&](int64_t lo, int64_t hi, int32_t id) {
    return std::find(x_.begin() + lo, x_.begin() + hi, id) != x_.begin() + hi;
  };
  bool stop = false;
  switch (s_.loop) {
    case BlockLoop::kLlada20:  // EOS anywhere in the generated window stops, whatever eos_early_stop says
      stop = holds(P_, end, info_.eos_id);
      break;
    case BlockLoop::kLlada21:
      stop = s_.eos_early_stop && !holds(P_, end, info_.mask_id) && holds(P_, end, info_.eos_id);
      break;
    default:
      for (int32_t id : s_.stop_ids) stop = stop || holds(P_, T_, id);
  }
  if (stop || block_ + 1 == num_blocks_) {
    done_ = true;
    return;
  }
  if (s_.cached) {
    phase_ = Phase::kCommit;  // the block's K/V joins the cache before the next block
    return;
  }
  ++block_;
  start_block();
}

const ForwardPlan& BlockDenoiser::plan() {
  if (done_) fail("BlockDenoiser::plan: generation is over");
  if (planned_) return plan_;
  const int64_t lo = block_ * B_;
  ForwardPlan& p = plan_;
  p = ForwardPlan{};
  p.rows = 1;
  p.attention_block = B_;
  int64_t from = 0, len = 0;
  if (phase_ == Phase::kPrefill) {
    from = 0, len = lo;
  } else if (s_.cached) {
    from = lo, len = B_;
  } else {
    from = 0, len = lo + B_;
  }
  p.tokens.assign(x_.begin() + from, x_.begin() + from + len);
  p.len = len;
  if (s_.cached) {
    p.cache = &cache_;
    p.cache_op = CacheOp::kExtend;
    p.cache_append = phase_ == Phase::kDenoise ? 0 : len;
    p.logits_from = phase_ == Phase::kDenoise ? 0 : len - 1;  // prefill / commit: logits unused
  } else {
    p.logits_from = lo;
  }
  planned_ = true;
  return p;
}

void BlockDenoiser::step(std::span<const float> logits) {
  const int64_t V = info_.vocab_size;
  if (logits.size() % static_cast<size_t>(V) != 0)
    fail("BlockDenoiser::step: ", logits.size(), " logits are not rows of ", V);
  step_with(static_cast<int64_t>(logits.size()) / V,
            [&](int64_t i) { return block_draw(logits.subspan(i * V, V), s_.sampling, rng_); });
}

bool BlockDenoiser::takes_stats() const {
  const BlockSampling& b = s_.sampling;
  return b.temperature <= 0 && (b.greedy_raw_confidence || (b.top_k <= 0 && b.top_p >= 1.0));
}

void BlockDenoiser::step(std::span<const LogitStats> stats) {
  if (!takes_stats()) fail("BlockDenoiser::step: this sampling reads the whole logits, not their stats");
  step_with(static_cast<int64_t>(stats.size()), [&](int64_t i) {
    return BlockDraw{stats[static_cast<size_t>(i)].argmax,
                     static_cast<double>(stats[static_cast<size_t>(i)].p_max)};
  });
}

template <class Draw>
void BlockDenoiser::step_with(int64_t rows, Draw&& draw) {
  if (done_) fail("BlockDenoiser::step: generation is over");
  if (!planned_) plan();
  planned_ = false;
  ++forwards_;
  forward_tokens_ += plan_.len;
  committed_[0].clear();
  edited_[0].clear();
  switch (phase_) {
    case Phase::kPrefill:
      if (cache_.seq_len != block_ * B_)
        fail("BlockDenoiser: the prefill left ", cache_.seq_len, " cached positions, not ", block_ * B_);
      start_block();
      break;
    case Phase::kCommit:
      if (cache_.seq_len != (block_ + 1) * B_)
        fail("BlockDenoiser: the block commit left ", cache_.seq_len, " cached positions, not ",
             (block_ + 1) * B_);
      ++block_;
      start_block();
      break;
    case Phase::kDenoise:
      if (rows != B_) fail("BlockDenoiser::step: ", rows, " rows of logits, expected ", B_);
      denoise_step(draw);
      break;
  }
  if (!done_) advance();
  event_canvas_[0].assign(x_.begin() + P_, x_.end());
  event_.block = block_;
  event_.step = iter_;
  event_.forwards = forwards_;
  event_.canvas = &event_canvas_;
  event_.committed = &committed_;
  event_.edited = &edited_;
  event_.row = row_;
}

template <class Draw>
void BlockDenoiser::denoise_step(Draw&& draw) {
  const int64_t lo = block_ * B_;
  const bool t2t = s_.loop == BlockLoop::kLlada21;
  std::vector<uint8_t> active(B_), editable(B_);
  std::vector<int32_t> current(x_.begin() + lo, x_.begin() + lo + B_), drawn(current);
  std::vector<double> p(B_, 0.0);
  bool any_active = false;
  for (int64_t i = 0; i < B_; ++i) {
    active[i] = current[i] == info_.mask_id;
    editable[i] = !active[i] && lo + i >= P_;
    any_active = any_active || active[i];
    if (active[i] || (t2t && editable[i])) {
      const BlockDraw d = draw(i);
      drawn[i] = d.token;
      p[i] = d.p;
    }
  }
  std::vector<int64_t> commit, edits;
  switch (s_.loop) {
    case BlockLoop::kLlada20:
      commit = commit_threshold_topk(p, active, s_.threshold, s_.schedule[iter_]);
      break;
    case BlockLoop::kLlada21:
      if (any_active) commit = commit_threshold_topk(p, active, s_.threshold, s_.num_to_transfer);
      edits = t2t_edits(current, drawn, p, editable, s_.editing_threshold);
      break;
    default: {
      const int64_t n = s_.schedule[iter_];
      commit = s_.remasking == SdarRemasking::kSequential ? commit_sequential(active, n)
               : s_.remasking == SdarRemasking::kLowConfidenceStatic
                   ? commit_topk(p, active, n)
                   : commit_threshold_topk(p, active, s_.threshold, n);
    }
  }
  bool eos_committed = false;
  for (int64_t i : commit) {
    x_[lo + i] = drawn[i];
    committed_[0].push_back(lo + i - P_);
    eos_committed = eos_committed || drawn[i] == info_.eos_id;
  }
  for (int64_t i : edits) {
    x_[lo + i] = drawn[i];
    edited_[0].push_back(lo + i - P_);
  }
  ++iter_;
  if (t2t && !any_active && edits.empty()) block_over_ = true;
  if (s_.loop == BlockLoop::kLlada20 && s_.eos_early_stop && eos_committed) {
    // The first EOS of the generated part (the reference searches the whole canvas, prompt included).
    const auto eos = std::find(x_.begin() + P_, x_.end(), info_.eos_id);
    if (eos != x_.end() && std::find(x_.begin() + P_, eos, info_.mask_id) == eos) {
      early_end_ = (eos - x_.begin()) + 1;
      done_ = true;
    }
  }
}

void BlockDenoiser::cancel() {
  cancelled_ = true;
  done_ = true;
}

GenerateResult BlockDenoiser::result() const {
  GenerateResult r;
  r.canvases = {x_};
  r.forwards = forwards_;
  r.forward_tokens = forward_tokens_;
  r.cancelled = cancelled_;
  int64_t end = P_ + s_.gen_length;
  if (early_end_ >= 0) {
    end = early_end_;
  } else {
    const bool sdar = s_.loop == BlockLoop::kSdar;
    for (int64_t i = P_; i < end; ++i) {
      const int32_t t = x_[i];
      const bool stop = sdar ? std::find(s_.stop_ids.begin(), s_.stop_ids.end(), t) != s_.stop_ids.end()
                             : t == info_.eos_id;
      if (stop) {
        end = i + 1;
        break;
      }
    }
  }
  end = std::find(x_.begin() + P_, x_.begin() + end, info_.mask_id) - x_.begin();  // never a mask id
  r.outputs = {std::vector<int32_t>(x_.begin() + P_, x_.begin() + end)};
  return r;
}

}  // namespace dllm
