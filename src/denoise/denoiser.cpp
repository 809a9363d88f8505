#include "denoise/denoiser.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

#include "core/error.h"
#include "denoise/sampler.h"
#include "denoise/schedule.h"

namespace dllm {

namespace {

// A per-position random stream, so results do not depend on the thread count or the order positions are
// visited.
uint64_t stream_seed(uint64_t seed, int64_t forward, int64_t row, int64_t pos) {
  uint64_t z = seed ^ (static_cast<uint64_t>(forward) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(row) << 48) ^ (static_cast<uint64_t>(pos) * 0xBF58476D1CE4E5B9ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool adaptive(Transfer t) {
  return t == Transfer::kThreshold || t == Transfer::kFactor;
}

// Infilling: the generated region is the canvas's masked positions, so gen_length is their number (equal in
// every row). The prompt-then-masks layout keeps params as given.
GenerateParams effective_params(const ModelInfo& info, const std::vector<std::vector<int32_t>>& rows,
                                const GenerateParams& params, bool infill) {
  if (!infill) return params;
  if (params.transfer == Transfer::kLlamaCli)
    fail(
        "infill: the llama_cli schedule lays its blocks over a prompt followed by masks, as "
        "llama-diffusion-cli does; infilling takes the other schedules");
  if (rows.empty()) fail("infill: no canvas given");
  GenerateParams p = params;
  p.gen_length = std::count(rows[0].begin(), rows[0].end(), info.mask_id);
  if (p.gen_length == 0) fail("infill: the canvas has no mask id (", info.mask_id, ") to fill");
  if (p.block_length > 0 && p.gen_length % p.block_length != 0)
    fail("infill: the canvas has ", p.gen_length, " masked positions, not a multiple of block_length ",
         p.block_length);
  return p;
}

}  // namespace

ForwardInput ForwardPlan::input() const {
  ForwardInput in;
  in.tokens = tokens;
  in.batch = rows;
  in.logits_from = logits_from;
  in.logits_to = logits_to;
  in.positions = positions;
  in.valid = valid;
  in.cache = cache;
  in.cache_op = cache_op;
  in.cache_offset = canvas_offset;
  in.cache_append = cache_append;
  in.attention_block = attention_block;
  return in;
}

DenoiseSettings resolve_settings(const ModelInfo& info, const GenerateParams& p) {
  DenoiseSettings s;
  if (info.block_size > 0)
    fail("generate: ", info.architecture,
         " is a block-diffusion family: its loops are the BlockDenoiser's (denoise/block_denoiser.h), which "
         "dllm::generate runs; infilling is not offered for it");
  if (p.block_loop != BlockLoop::kDefault)
    fail("generate: block_loop (LLaDA2.0 / LLaDA2.1 / SDAR) needs a block-diffusion model; ",
         info.architecture, " is not one");
  if (p.unmask == Unmask::kLowConfidenceStatic || p.unmask == Unmask::kLowConfidenceDynamic)
    fail(
        "generate: remasking low_confidence_static / low_confidence_dynamic are SDAR's strategies "
        "(block-diffusion families only); ",
        info.architecture,
        " takes confidence, margin, entropy, random, sequential (low_confidence = confidence)");
  if (p.cache == CacheMode::kBlock)
    fail("generate: the block cache is for block-diffusion families (LLaDA2, SDAR); ", info.architecture,
         " takes none, prefix or dual");
  const bool llama_cli = p.transfer == Transfer::kLlamaCli;
  if (llama_cli && p.cache != CacheMode::kDefault && p.cache != CacheMode::kNone)
    fail(
        "generate: the llama_cli schedule recomputes the whole canvas every step, as llama-diffusion-cli "
        "does; cache must be none");
  const bool dream = info.architecture == "dream";
  PredictionOptions& o = s.prediction;
  const bool categorical = p.sampler == Sampler::kDefault ? dream : p.sampler == Sampler::kCategorical;
  o.rule = categorical ? TokenRule::kDream : TokenRule::kLlada;
  o.temperature = p.temperature;
  if (p.temperature < 0) fail("generate: temperature must be >= 0, got ", p.temperature);
  if (p.cfg_scale < 0) fail("generate: cfg_scale must be >= 0, got ", p.cfg_scale);
  if (!(p.top_p > 0 && p.top_p <= 1)) fail("generate: top_p must be in (0, 1], got ", p.top_p);
  if (p.alg_temp < 0) fail("generate: alg_temp must be >= 0, got ", p.alg_temp);
  if (!(p.eps > 0 && p.eps < 1)) fail("generate: eps must be in (0, 1), got ", p.eps);
  if (p.cache_refresh < 0) fail("generate: cache_refresh must be >= 0, got ", p.cache_refresh);
  if (categorical) {
    // transformers 4.46 leaks PretrainedConfig's top_k=50 into Dream's generation config.
    o.top_k = p.top_k < 0 ? (dream ? 50 : 0) : p.top_k;
    o.top_p = p.top_p;
  } else if (p.top_k > 0 || p.top_p < 1) {
    fail(
        "generate: top_k/top_p belong to the categorical sampler (Dream's token rule); the gumbel sampler "
        "(LLaDA's generate()) has none (got top_k ",
        p.top_k, ", top_p ", p.top_p, ")");
  }

  // Which positions, and how many per step; Dream's default alg is 'origin' (generation_config.json).
  s.transfer = p.transfer;
  Unmask score = p.unmask;
  // llama-diffusion-cli's deterministic setting (--top-k 1) leaves every confidence at 1: leftmost first.
  if (llama_cli && score == Unmask::kDefault && p.remasking != Remasking::kRandom)
    score = Unmask::kSequential;
  if (dream && score == Unmask::kDefault && s.transfer == Transfer::kDefault) {
    score = Unmask::kRandom;
    s.transfer = Transfer::kTimestepBernoulli;
  }
  if (score == Unmask::kDefault)
    score = dream ? Unmask::kConfidence
                  : (p.remasking == Remasking::kRandom ? Unmask::kRandom : Unmask::kConfidence);
  if (s.transfer == Transfer::kDefault) s.transfer = dream ? Transfer::kTimestep : Transfer::kUniform;
  o.score = score;
  if (s.transfer == Transfer::kThreshold && !(p.threshold > 0 && p.threshold <= 1))
    fail("generate: threshold must be in (0, 1], got ", p.threshold);
  if (s.transfer == Transfer::kFactor && !(p.factor > 0))
    fail("generate: factor must be > 0, got ", p.factor);
  if (score == Unmask::kSequential && p.alg_temp > 0)
    fail("generate: alg_temp ", p.alg_temp, " draws positions by their score; unmask 'sequential' has none");
  if (adaptive(s.transfer) && p.alg_temp > 0)
    fail("generate: alg_temp ", p.alg_temp,
         " samples a fixed number of positions; it does not combine with the "
         "threshold / factor rules");
  s.threshold = p.threshold;
  s.factor = p.factor;
  s.alg_temp = p.alg_temp;
  s.eps = p.eps;

  if (p.logits_eos_inf) o.suppress_token = info.eos_id;
  if (p.confidence_eos_eot_inf) {
    // The reference writes `logits_with_noise[eos] = logits[eot] = -inf`; at temperature 0 those two tensors
    // are the same object, so EOS is excluded from the confidence softmax too.
    o.confidence_exclude[0] = info.eot_id;
    if (p.temperature <= 0) o.confidence_exclude[1] = info.eos_id;
  }

  if (p.gen_length <= 0) fail("generate: gen_length must be > 0, got ", p.gen_length);
  if (llama_cli && p.block_length > 0) {
    // Blocks over prompt + generation: their number and steps need the prompt (start_llama_cli_blocks).
    s.canvas_blocks = true;
    s.block_length = p.block_length;
  } else {
    s.block_length = p.block_length > 0 ? p.block_length : p.gen_length;
    if (p.gen_length % s.block_length != 0)
      fail("generate: gen_length ", p.gen_length, " is not a multiple of block_length ", s.block_length);
    s.num_blocks = p.gen_length / s.block_length;
    if (adaptive(s.transfer)) {
      s.steps_per_block = s.block_length;  // a cap: every step commits at least one position
    } else {
      const int64_t steps = p.steps > 0 ? p.steps : p.gen_length;
      if (steps % s.num_blocks != 0)
        fail("generate: steps ", steps, " is not a multiple of the number of blocks ", s.num_blocks,
             " (gen_length / block_length)");
      s.steps_per_block = steps / s.num_blocks;
    }
  }
  s.cfg = p.cfg_scale > 0;
  s.shift = info.shift_logits;
  s.cache = p.cache == CacheMode::kDefault ? CacheMode::kNone : p.cache;
  s.cache_refresh = p.cache_refresh;
  return s;
}

// llama-diffusion-cli's block layout: the canvas (prompt + generation, its -ub) in canvas / block_length
// blocks, the first starting where the prompt ends; steps / blocks steps each (steps 0 = the canvas length:
// one position per step in a whole block).
void Denoiser::start_llama_cli_blocks() {
  const int64_t B = s_.block_length;
  if (total_len_ % B != 0)
    fail("generate: the llama_cli schedule needs prompt + gen_length (", prompt_len_, " + ",
         params_.gen_length, " = ", total_len_,
         ", llama-diffusion-cli's -ub) to be a multiple of block_length ", B);
  s_.num_blocks = total_len_ / B;
  const int64_t steps = params_.steps > 0 ? params_.steps : total_len_;
  if (steps % s_.num_blocks != 0)
    fail("generate: steps ", steps, " is not a multiple of the number of blocks ", s_.num_blocks,
         " ((prompt + gen_length) / block_length, as llama-diffusion-cli counts them)");
  s_.steps_per_block = steps / s_.num_blocks;
}

ModelInfo with_token_overrides(const ModelInfo& info, const GenerateParams& params) {
  ModelInfo out = info;
  for (auto [name, id, field] : {std::tuple{"mask_id", params.mask_id, &out.mask_id},
                                 std::tuple{"eos_id", params.eos_id, &out.eos_id}}) {
    if (id == -1) continue;
    if (id < 0 || id >= info.vocab_size)
      fail("generate: ", name, " ", id, " is outside the vocabulary [0, ", info.vocab_size, ")");
    *field = id;
  }
  if (out.mask_id < 0)
    fail(info.path,
         ": the model's files name no [MASK] id (no mask_token_id in config.json, no <|mask|> in "
         "tokenizer.json); give it (--mask-id / GenerateParams::mask_id)");
  return out;
}

// info_ is declared first: the members after it see the ids the request gave.
Denoiser::Denoiser(const ModelInfo& info, const std::vector<std::vector<int32_t>>& prompts,
                   const GenerateParams& params, bool infill)
    : info_(with_token_overrides(info, params)),
      params_(effective_params(info_, prompts, params, infill)),
      s_(resolve_settings(info_, params_)) {
  if (prompts.empty()) fail("generate: no prompt given");
  batch_ = static_cast<int64_t>(prompts.size());
  if (infill) {
    init_infill(prompts);
    start_block();
    return;
  }
  for (const auto& prompt : prompts)
    prompt_len_ = std::max<int64_t>(prompt_len_, static_cast<int64_t>(prompt.size()));
  for (size_t r = 0; r < prompts.size(); ++r)
    for (int32_t t : prompts[r])
      if (t < 0 || t >= info_.vocab_size)
        fail("generate: prompt ", r, " has token id ", t, " outside the vocabulary [0, ", info_.vocab_size,
             ")");
  total_len_ = prompt_len_ + params.gen_length;
  if (total_len_ > info_.max_seq_len)
    fail("generate: prompt (", prompt_len_, ") + gen_length (", params.gen_length,
         ") exceeds the model's maximum of ", info_.max_seq_len, " positions");
  const int32_t mask = info_.mask_id;
  const int32_t pad_id = info_.pad_id >= 0 ? info_.pad_id : info_.eos_id;

  // x = left-padded prompt (pad id, as the references batch prompts of unequal length) + gen_length masks.
  // LLaDA's model ignores the attention mask (the pads are attended); Dream masks them out (valid_i AND
  // valid_j) and gives position ids cumsum(valid) - 1, pads 1.
  x_.assign(batch_, std::vector<int32_t>(total_len_, mask));
  bool padded = false;
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t pad = prompt_len_ - static_cast<int64_t>(prompts[b].size());
    padded |= pad > 0;
    std::fill(x_[b].begin(), x_[b].begin() + pad, pad_id);
    std::copy(prompts[b].begin(), prompts[b].end(), x_[b].begin() + pad);
  }
  if (padded && info_.architecture == "dream") {  // Dream masks padding out of attention; LLaDA attends to it
    valid_.assign(batch_ * total_len_, 1);
    positions_.assign(batch_ * total_len_, 1);
    for (int64_t b = 0; b < batch_; ++b) {
      const int64_t pad = prompt_len_ - static_cast<int64_t>(prompts[b].size());
      for (int64_t i = 0; i < total_len_; ++i) {
        valid_[b * total_len_ + i] = i >= pad;
        if (i >= pad) positions_[b * total_len_ + i] = i - pad;
      }
    }
  }
  // prompt_index: everything that is not a mask at the start (the cfg branch masks exactly these).
  is_prompt_.resize(batch_);
  first_mask_ = prompt_len_;  // masks inside the prompt (infilling) need logits too
  for (int64_t b = 0; b < batch_; ++b) {
    is_prompt_[b].resize(total_len_);
    for (int64_t i = 0; i < total_len_; ++i) {
      is_prompt_[b][i] = x_[b][i] != mask;
      if (!is_prompt_[b][i]) first_mask_ = std::min(first_mask_, i);
    }
  }
  slots_.assign(batch_, std::vector<int64_t>(params_.gen_length));
  for (int64_t b = 0; b < batch_; ++b) std::iota(slots_[b].begin(), slots_[b].end(), prompt_len_);
  finished_.assign(batch_, 0);
  canvas_.resize(batch_);
  committed_.resize(batch_);
  committed_scores_.resize(batch_);
  if (s_.canvas_blocks) start_llama_cli_blocks();
  start_block();
}

// Infilling: each row is a whole canvas (equal lengths, no padding) whose mask ids are the positions to fill;
// blocks are consecutive runs of block_length masked positions, left to right.
void Denoiser::init_infill(const std::vector<std::vector<int32_t>>& canvases) {
  if (params_.stop_at_eos) fail("infill: stop_at_eos applies to a generated tail, not to an infilled canvas");
  const int32_t mask = info_.mask_id;
  total_len_ = static_cast<int64_t>(canvases[0].size());
  prompt_len_ = 0;  // the generated region (canvas_, committed positions, outputs) is the whole canvas
  if (total_len_ > info_.max_seq_len)
    fail("infill: the canvas (", total_len_, " tokens) exceeds the model's maximum of ", info_.max_seq_len,
         " positions");
  x_ = canvases;
  is_prompt_.resize(batch_);
  slots_.resize(batch_);
  first_mask_ = total_len_;
  for (int64_t b = 0; b < batch_; ++b) {
    if (static_cast<int64_t>(x_[b].size()) != total_len_)
      fail("infill: canvas ", b, " has ", x_[b].size(), " tokens, canvas 0 has ", total_len_,
           "; the rows of a batch must have equal length");
    is_prompt_[b].resize(total_len_);
    for (int64_t i = 0; i < total_len_; ++i) {
      const int32_t t = x_[b][i];
      if (t < 0 || t >= info_.vocab_size)
        fail("infill: canvas ", b, " has token id ", t, " outside the vocabulary [0, ", info_.vocab_size,
             ")");
      is_prompt_[b][i] = t != mask;
      if (t == mask) slots_[b].push_back(i);
    }
    if (static_cast<int64_t>(slots_[b].size()) != params_.gen_length)
      fail("infill: canvas ", b, " has ", slots_[b].size(), " masked positions, canvas 0 has ",
           params_.gen_length, "; the rows of a batch must have the same number");
    first_mask_ = std::min(first_mask_, slots_[b].front());
  }
  finished_.assign(batch_, 0);
  canvas_.resize(batch_);
  committed_.resize(batch_);
  committed_scores_.resize(batch_);
}

// The current block of row b is the canvas range from its first to past its last generated slot: for the
// prompt-then-masks layout [prompt_len + block * block_length, + block_length). llama-diffusion-cli's blocks
// are cut at the canvas's end (short or empty).
int64_t Denoiser::block_begin(int64_t b) const {
  if (s_.canvas_blocks) return std::min(prompt_len_ + block_ * s_.block_length, total_len_);
  return slots_[b][block_ * s_.block_length];
}
int64_t Denoiser::block_end(int64_t b) const {
  if (s_.canvas_blocks) return std::min(prompt_len_ + (block_ + 1) * s_.block_length, total_len_);
  return slots_[b][(block_ + 1) * s_.block_length - 1] + 1;
}

int64_t Denoiser::count_masks(int64_t row, int64_t lo, int64_t hi) const {
  return std::count(x_[row].begin() + lo, x_[row].begin() + hi, info_.mask_id);
}

void Denoiser::start_block() {
  step_ = 0;
  cache_.clear();
  if (s_.transfer == Transfer::kUniform || s_.canvas_blocks) {
    quota_.assign(batch_, {});
    for (int64_t b = 0; b < batch_; ++b)
      quota_[b] = uniform_transfer_counts(count_masks(b, block_begin(b), block_end(b)), s_.steps_per_block);
  } else if (s_.transfer == Transfer::kTimestep || s_.transfer == Transfer::kTimestepBernoulli) {
    timesteps_ = dream_timesteps(s_.steps_per_block, s_.eps);
  }
}

const ForwardPlan& Denoiser::plan() {
  if (done_) fail("denoiser: plan() after the generation finished");
  if (!planned_) build_plan();  // once per step: a scheduler may ask again before it steps
  return plan_;
}

void Denoiser::build_plan() {
  ForwardPlan& p = plan_;
  const int64_t rows = s_.cfg ? 2 * batch_ : batch_;
  // The union of the rows' current blocks (one range for the prompt-then-masks layout).
  int64_t union_begin = total_len_, union_end = 0;
  for (int64_t b = 0; b < batch_; ++b) {
    union_begin = std::min(union_begin, block_begin(b));
    union_end = std::max(union_end, block_end(b));
  }
  const bool reuse = s_.cache != CacheMode::kNone && step_ > 0 &&
                     !(s_.cache_refresh > 0 && step_ % s_.cache_refresh == 0) && !cache_.empty();
  const int64_t shift = s_.shift ? 1 : 0;
  int64_t lo = 0, hi = total_len_;
  if (reuse) {
    lo = std::max<int64_t>(0, union_begin - shift);
    hi = s_.cache == CacheMode::kDual ? union_end : total_len_;
  }
  p.rows = rows;
  p.len = hi - lo;
  p.canvas_offset = lo;
  // Logits are read only at the eligible positions that are still masked (predict_positions): from the first
  // of them (earlier blocks are done) to the current blocks' end.
  int64_t need_lo = union_end;
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t from = s_.canvas_blocks ? block_begin(b) : first_mask_, to = block_end(b);
    int64_t pos = from;
    while (pos < to && x_[b][pos] != info_.mask_id) ++pos;
    need_lo = std::min(need_lo, pos < to ? pos : from);
  }
  p.logits_from =
      reuse ? 0 : std::clamp<int64_t>(need_lo - shift, 0, std::max<int64_t>(0, union_end - shift - 1));
  // Only the eligible positions' logits are read (predict_positions): none past the current blocks' end.
  const int64_t logits_end = std::clamp<int64_t>(union_end - shift - lo, p.logits_from + 1, p.len);
  p.logits_to = logits_end == p.len ? 0 : logits_end;
  p.cache = s_.cache == CacheMode::kNone ? nullptr : &cache_;
  p.cache_op = s_.cache == CacheMode::kNone ? CacheOp::kNone : (reuse ? CacheOp::kReuse : CacheOp::kStore);
  p.tokens.resize(rows * p.len);
  for (int64_t b = 0; b < batch_; ++b) {
    std::copy(x_[b].begin() + lo, x_[b].begin() + hi, p.tokens.begin() + b * p.len);
    if (s_.cfg)  // uncond rows: every prompt position masked
      for (int64_t i = lo; i < hi; ++i)
        p.tokens[(batch_ + b) * p.len + i - lo] = is_prompt_[b][i] ? info_.mask_id : x_[b][i];
  }
  p.positions.clear();
  p.valid.clear();
  if (!positions_.empty()) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = r % batch_;
      p.positions.insert(p.positions.end(), positions_.begin() + b * total_len_ + lo,
                         positions_.begin() + b * total_len_ + hi);
      p.valid.insert(p.valid.end(), valid_.begin() + b * total_len_ + lo,
                     valid_.begin() + b * total_len_ + hi);
    }
  }
  ++plans_;
  planned_ = true;
}

// Classifier-free guidance: un + (cfg_scale + 1) (cond - un), the cond rows first.
const float* Denoiser::guide(const float* logits, int64_t span, std::vector<float>& combined) const {
  if (!s_.cfg) return logits;
  const int64_t vocab = info_.vocab_size;
  const float scale = static_cast<float>(params_.cfg_scale + 1.0);
  const size_t half = static_cast<size_t>(batch_ * span * vocab);
  combined.resize(half);
  for (size_t i = 0; i < half; ++i) {
    const float un = logits[half + i];
    combined[i] = un + scale * (logits[i] - un);
  }
  return combined.data();
}

// Eligible: masked positions before the end of the current block, from the first mask (earlier blocks
// included, as the references do) or, on a cached step and in llama-diffusion-cli's blocks, within the
// current block only (Fast-dLLM, llama-diffusion-cli).
Denoiser::Eligible Denoiser::eligible(bool reuse) const {
  Eligible e;
  e.lo_of.resize(batch_);
  e.hi_of.resize(batch_);
  e.lo = total_len_;
  int64_t top = 0;
  for (int64_t b = 0; b < batch_; ++b) {
    e.lo_of[b] = reuse || s_.canvas_blocks ? block_begin(b) : first_mask_;
    e.hi_of[b] = block_end(b);
    e.lo = std::min(e.lo, e.lo_of[b]);
    top = std::max(top, e.hi_of[b]);
  }
  e.width = top - e.lo;
  return e;
}

// Token and score of every eligible position, each from its own random stream; predict(row, rng) reads the
// position's row (of logits or their stats), row = (b * span) + source(pos) - first logit.
template <class Predict>
void Denoiser::predict_positions(const Eligible& e, Predict&& predict) {
  const int32_t mask = info_.mask_id;
  const int64_t span = plan_.logits_rows();
  const int64_t first_logit = plan_.canvas_offset + plan_.logits_from;
  auto source = [&](int64_t pos) { return s_.shift && pos > 0 ? pos - 1 : pos; };  // Dream's logit shift
  pred_.resize(batch_ * e.width);
#pragma omp parallel for collapse(2) schedule(dynamic, 4)
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t i = 0; i < e.width; ++i) {
      const int64_t pos = e.lo + i;
      if (pos < e.lo_of[b] || pos >= e.hi_of[b] || x_[b][pos] != mask || finished_[b]) continue;
      Rng rng(stream_seed(params_.seed, forwards_, b, pos));
      pred_[b * e.width + i] = predict(b * span + source(pos) - first_logit, rng);
    }
}

// What the "how many" rules need from the whole step: Dream's k from the batch-mean number of masks
// (float32), and the Bernoulli probability, once for all rows.
Denoiser::StepCounts Denoiser::step_counts(const Eligible& e) const {
  StepCounts n;
  if (s_.transfer != Transfer::kTimestep && s_.transfer != Transfer::kTimestepBernoulli) return n;
  const bool last_step = step_ == s_.steps_per_block - 1;
  int64_t total = 0;
  for (int64_t b = 0; b < batch_; ++b) total += count_masks(b, e.lo_of[b], e.hi_of[b]);
  const float mean = static_cast<float>(total) / static_cast<float>(batch_);
  const float t = timesteps_[step_], s = timesteps_[step_ + 1];
  n.timestep_k = timestep_transfer_count(mean, t, s, last_step);
  n.p_transfer = timestep_bernoulli_probability(t, s, last_step);
  return n;
}

// The positions row b commits this step: its "how many" rule, then the draw (top scores, multinomial,
// Bernoulli).
std::vector<int64_t> Denoiser::choose(int64_t b, const Eligible& e, const StepCounts& n) const {
  std::vector<int64_t> eligible;
  for (int64_t pos = e.lo_of[b]; pos < e.hi_of[b]; ++pos)
    if (x_[b][pos] == info_.mask_id) eligible.push_back(pos);
  if (s_.transfer == Transfer::kTimestepBernoulli) {
    Rng rng(stream_seed(params_.seed ^ 0x5bd1e995ull, forwards_, b, -1));
    return sample_bernoulli(eligible, n.p_transfer, rng);
  }
  // Order by score, equal scores to the lower position.
  auto conf = [&](int64_t pos) { return pred_[b * e.width + pos - e.lo].confidence; };
  std::stable_sort(eligible.begin(), eligible.end(), [&](int64_t a, int64_t c) { return conf(a) > conf(c); });
  std::vector<double> scores;
  for (int64_t pos : eligible) scores.push_back(conf(pos));
  int64_t k = 0;
  switch (s_.transfer) {
    case Transfer::kUniform:
      k = quota_[b][step_];
      break;
    case Transfer::kTimestep:
      k = n.timestep_k;
      break;
    case Transfer::kThreshold:
      k = threshold_count(scores, s_.threshold);
      break;
    case Transfer::kFactor:
      k = factor_count(scores, s_.factor);
      break;
    case Transfer::kLlamaCli:
      k = s_.canvas_blocks
              ? quota_[b][step_]
              : llama_cli_timestep_count(step_, s_.steps_per_block, static_cast<int64_t>(eligible.size()),
                                         static_cast<float>(s_.eps));
      break;
    default:
      break;
  }
  k = std::min<int64_t>(k, static_cast<int64_t>(eligible.size()));
  if (s_.alg_temp > 0 && k > 0) {
    Rng rng(stream_seed(params_.seed ^ 0x2545F4914F6CDD1Dull, forwards_, b, -1));
    return sample_multinomial(eligible, scores, k, s_.alg_temp, rng);
  }
  eligible.resize(k);
  return eligible;
}

void Denoiser::step(std::span<const float> logits_in) {
  if (!planned_) fail("denoiser: step() without a plan()");
  const int64_t vocab = info_.vocab_size, span = plan_.logits_rows();
  if (static_cast<int64_t>(logits_in.size()) != plan_.rows * span * vocab)
    fail("denoiser: got ", logits_in.size(), " logits, the plan needs ", plan_.rows * span * vocab);
  std::vector<float> combined;
  const float* logits = guide(logits_in.data(), span, combined);
  step_with([&](int64_t row, Rng& rng) {
    return predict({logits + row * vocab, static_cast<size_t>(vocab)}, s_.prediction, rng);
  });
}

bool Denoiser::takes_stats() const {
  const PredictionOptions& o = s_.prediction;
  const bool filtered = o.rule == TokenRule::kDream && (o.top_p < 1.0 || o.top_k > 0);
  return o.temperature <= 0 && !s_.cfg && !filtered && o.suppress_token < 0 && o.confidence_exclude[0] < 0 &&
         o.confidence_exclude[1] < 0;
}

void Denoiser::step(std::span<const LogitStats> stats) {
  if (!planned_) fail("denoiser: step() without a plan()");
  if (!takes_stats()) fail("denoiser: this step's rule reads the whole logits, not their stats");
  const int64_t rows = plan_.rows * plan_.logits_rows();
  if (static_cast<int64_t>(stats.size()) != rows)
    fail("denoiser: got the stats of ", stats.size(), " rows, the plan needs ", rows);
  step_with([&](int64_t row, Rng& rng) {
    return prediction_from_stats(stats[static_cast<size_t>(row)], s_.prediction.score, rng);
  });
}

template <class Predict>
void Denoiser::step_with(Predict&& predict) {
  planned_ = false;
  const ForwardPlan& p = plan_;
  ++forwards_;
  forward_tokens_ += p.rows * p.len;

  const Eligible e = eligible(p.cache_op == CacheOp::kReuse);
  // llama-diffusion-cli runs the forward first and ends the block when it then finds no mask in it (an
  // empty trailing block still costs its forward).
  bool any_mask = false;
  for (int64_t b = 0; b < batch_; ++b)
    any_mask |= !finished_[b] && count_masks(b, e.lo_of[b], e.hi_of[b]) > 0;
  const bool llama_cli_break = s_.transfer == Transfer::kLlamaCli && !any_mask;
  for (auto& c : committed_) c.clear();
  for (auto& c : committed_scores_) c.clear();
  if (!llama_cli_break) {
    predict_positions(e, predict);
    const StepCounts n = step_counts(e);
    for (int64_t b = 0; b < batch_; ++b) {
      if (finished_[b]) continue;
      for (int64_t pos : choose(b, e, n)) {
        const Prediction& pr = pred_[b * e.width + pos - e.lo];
        x_[b][pos] = pr.token;  // may be the mask id itself (kept masked)
        committed_[b].push_back(pos - prompt_len_);
        committed_scores_[b].push_back(pr.confidence);
      }
      if (params_.stop_at_eos) check_stop_at_eos(b);
    }
  }

  event_.block = block_;
  event_.step = step_;
  event_.forwards = forwards_;
  for (int64_t b = 0; b < batch_; ++b) canvas_[b].assign(x_[b].begin() + prompt_len_, x_[b].end());
  event_.canvas = &canvas_;
  event_.committed = &committed_;
  event_.committed_scores = &committed_scores_;

  ++step_;
  // llama-diffusion-cli does not skip ahead when a step empties its block: the next forward finds it empty.
  const bool block_done = s_.transfer == Transfer::kLlamaCli ? llama_cli_break : block_finished();
  if (std::all_of(finished_.begin(), finished_.end(), [](uint8_t f) { return f; })) {
    done_ = true;
  } else if (step_ >= s_.steps_per_block || block_done) {
    if (++block_ >= s_.num_blocks)
      done_ = true;
    else
      start_block();
  }
}

// Early stop: nothing left to commit in the current block. Fixed schedules look at every eligible position
// (earlier blocks included, so skipping is exact); the adaptive rules, like Fast-dLLM, at the block itself.
bool Denoiser::block_finished() const {
  for (int64_t b = 0; b < batch_; ++b)
    if (!finished_[b] &&
        count_masks(b, adaptive(s_.transfer) ? block_begin(b) : first_mask_, block_end(b)) > 0)
      return false;
  return true;
}

// Stop once an EOS is committed with nothing masked before it: the answer is complete.
void Denoiser::check_stop_at_eos(int64_t b) {
  if (info_.eos_id < 0) return;
  for (int64_t pos = prompt_len_; pos < total_len_; ++pos) {
    if (x_[b][pos] == info_.mask_id) return;
    if (x_[b][pos] == info_.eos_id) {
      std::fill(x_[b].begin() + pos, x_[b].end(), info_.eos_id);
      finished_[b] = 1;
      return;
    }
  }
}

void Denoiser::cancel() {
  cancelled_ = true;
  done_ = true;
}

GenerateResult Denoiser::result() const {
  GenerateResult r;
  for (int64_t b = 0; b < batch_; ++b) r.outputs.emplace_back(x_[b].begin() + prompt_len_, x_[b].end());
  r.forwards = forwards_;
  r.forward_tokens = forward_tokens_;
  r.cancelled = cancelled_;
  return r;
}

}  // namespace dllm
