#include "denoise/strategy_names.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace dllm {

namespace {

constexpr NamedValue<UnmaskWord> kUnmaskWords[] = {
    {"confidence", {Unmask::kConfidence}, "p[x0], the probability of the predicted token"},
    {"margin", {Unmask::kMargin}, "p_top1 - p_top2"},
    {"entropy", {Unmask::kEntropy}, "the negative entropy sum p log(p + 1e-10)"},
    {"random", {Unmask::kRandom}, "a uniform random order"},
    {"origin",
     {Unmask::kRandom, Transfer::kTimestepBernoulli},
     "Dream's default alg: a random order, each masked position revealed with probability 1 - s/t (sets the "
     "schedule to timestep_bernoulli)"},
    {"sequential",
     {Unmask::kSequential},
     "left to right, the step's count from the first mask on (SDAR; llama-diffusion-cli with --top-k 1, "
     "where every confidence is 1; the llama_cli schedule's default)"},
    {"low_confidence_static",
     {Unmask::kLowConfidenceStatic},
     "SDAR: the most confident masks, a fixed count per step (block-diffusion loops only)"},
    {"low_confidence_dynamic",
     {Unmask::kLowConfidenceDynamic},
     "SDAR: every mask above the threshold, else the most confident (block-diffusion loops only; SDAR's "
     "default)"},
    {"low_confidence", {Unmask::kConfidence}, "LLaDA's remasking name"},
    {"maskgit_plus", {Unmask::kConfidence}, "Dream's alg name"},
    {"topk_margin", {Unmask::kMargin}, "Dream's alg name"},
};

constexpr NamedValue<Transfer> kTransferWords[] = {
    {"uniform", Transfer::kUniform, "LLaDA: masked // steps per step of a block, the remainder first"},
    {"timestep", Transfer::kTimestep,
     "Dream: int(masked * (1 - s/t)), t = linspace(1, eps, steps + 1); all on the last"},
    {"timestep_bernoulli", Transfer::kTimestepBernoulli,
     "Dream alg=origin: each masked position independently with probability 1 - s/t"},
    {"threshold", Transfer::kThreshold,
     "Fast-dLLM: the best position plus every one with confidence >= threshold (--threshold, default 0.9)"},
    {"factor", Transfer::kFactor,
     "Fast-dLLM: the largest n with (n + 1)(1 - c_n) < factor, at least one (--factor, default 1)"},
    {"llama_cli", Transfer::kLlamaCli,
     "llama.cpp's llama-diffusion-cli: with --block-length, (prompt + gen) / block_length blocks starting at "
     "the prompt's end (the last short or empty), steps / blocks per block, masked // steps per step; "
     "without, int(masked * (1 - s/t)), t = 1 - step/steps (1 - eps); a step that finds its block without a "
     "mask is a forward too"},
};

constexpr NamedValue<Sampler> kSamplerWords[] = {
    {"gumbel", Sampler::kGumbel,
     "LLaDA's token rule: argmax of the logits, Gumbel-max in float64 when temperature > 0; confidence from "
     "the "
     "raw softmax"},
    {"categorical", Sampler::kCategorical,
     "Dream's token rule: logits / temperature, top-p / top-k filters, a categorical draw when temperature > "
     "0"},
};

constexpr NamedValue<CacheMode> kCacheWords[] = {
    {"none", CacheMode::kNone, "every step recomputes the whole canvas (exact)"},
    {"prefix", CacheMode::kPrefix, "K/V before the current block computed once per block (Fast-dLLM)"},
    {"dual", CacheMode::kDual,
     "K/V before and after the current block kept; only the block recomputed (Fast-dLLM)"},
    {"block", CacheMode::kBlock,
     "block-diffusion models (LLaDA2, SDAR; their default): finished blocks' K/V computed once (exact)"},
};

constexpr NamedValue<BlockLoop> kBlockLoopWords[] = {
    {"llada2.0", BlockLoop::kLlada20,
     "LLaDA2.0 generate(): threshold commits with a top-k fallback, stop after a block holding EOS"},
    {"llada2.1", BlockLoop::kLlada21,
     "LLaDA2.1 generate(): the same plus token-to-token editing (editing threshold, post steps); llada2's "
     "default"},
    {"sdar", BlockLoop::kSdar,
     "SDAR block_diffusion_generate(): sequential / low_confidence_static / low_confidence_dynamic, stop "
     "ids; "
     "sdar's default"},
};

}  // namespace

template <class V>
std::optional<V> StrategyAxis<V>::find(std::string_view word) const {
  for (const auto& w : words)
    if (w.name == word) return w.value;
  return std::nullopt;
}

template <class V>
V StrategyAxis<V>::parse(std::string_view word, std::string_view where) const {
  if (auto v = find(word)) return *v;
  fail(where, ": '", word, "' is not one of ", accepted());
}

template <class V>
std::string_view StrategyAxis<V>::canonical(std::string_view word) const {
  const auto v = find(word);
  if (!v) return word;
  for (const auto& w : words)
    if (w.value == *v) return w.name;
  return word;
}

template <class V>
std::string StrategyAxis<V>::names(std::string_view separator) const {
  std::string out;
  for (const auto& w : words)
    if (!is_alias(w)) out += std::string(out.empty() ? "" : separator) + std::string(w.name);
  return out;
}

template <class V>
std::string StrategyAxis<V>::accepted() const {
  std::string out = names(", "), aliases;
  for (const auto& w : words)
    if (is_alias(w))
      aliases += std::string(aliases.empty() ? "" : ", ") + std::string(w.name) + " = " +
                 std::string(canonical(w.name));
  return aliases.empty() ? out : out + " (aliases: " + aliases + ")";
}

template struct StrategyAxis<UnmaskWord>;
template struct StrategyAxis<Transfer>;
template struct StrategyAxis<CacheMode>;
template struct StrategyAxis<Sampler>;
template struct StrategyAxis<BlockLoop>;

const StrategyAxis<BlockLoop>& block_loop_words() {
  static const StrategyAxis<BlockLoop> axis{
      "block_loop", "which official block-diffusion loop runs", {"block-loop"}, kBlockLoopWords};
  return axis;
}

const StrategyAxis<UnmaskWord>& unmask_axis() {
  static const StrategyAxis<UnmaskWord> axis{
      "unmask", "which masked positions are revealed first", {"unmask", "alg", "remasking"}, kUnmaskWords};
  return axis;
}

const StrategyAxis<Transfer>& transfer_axis() {
  static const StrategyAxis<Transfer> axis{
      "schedule", "how many positions are revealed per step", {"schedule"}, kTransferWords};
  return axis;
}

const StrategyAxis<Sampler>& sampler_axis() {
  static const StrategyAxis<Sampler> axis{
      "sampler", "which token a masked position takes", {"sampler"}, kSamplerWords};
  return axis;
}

const StrategyAxis<CacheMode>& cache_axis() {
  static const StrategyAxis<CacheMode> axis{"cache", "what a step recomputes", {"cache"}, kCacheWords};
  return axis;
}

namespace {

template <class V>
void markdown_axis(std::ostringstream& os, const StrategyAxis<V>& axis) {
  os << "* " << axis.what << " (";
  for (size_t i = 0; i < axis.keys.size(); ++i) os << (i ? ", " : "") << "`--" << axis.keys[i] << "`";
  os << "; request field";
  os << (axis.keys.size() > 1 ? "s " : " ");
  for (size_t i = 0; i < axis.keys.size(); ++i) os << (i ? ", " : "") << "`" << axis.keys[i] << "`";
  os << "):\n";
  for (const auto& w : axis.words) {
    os << "  * `" << w.name << "`";
    if (axis.is_alias(w)) os << " = `" << axis.canonical(w.name) << "`";
    os << ": " << w.help << "\n";
  }
}

}  // namespace

std::string strategy_words_markdown() {
  std::ostringstream os;
  markdown_axis(os, unmask_axis());
  markdown_axis(os, transfer_axis());
  markdown_axis(os, sampler_axis());
  markdown_axis(os, cache_axis());
  return os.str();
}

namespace {

std::string format_number(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

// The value of the word given under `key`, if given.
template <class V>
std::optional<V> word_of(const StrategyChoice& c, const StrategyAxis<V>& axis, const std::string& key) {
  auto it = c.words.find(key);
  if (it == c.words.end()) return std::nullopt;
  if (auto v = axis.find(it->second)) return v;
  throw StrategyError(key, "'" + it->second + "' is not one of " + axis.accepted());
}

}  // namespace

void apply_strategy(const StrategyChoice& c, GenerateParams& p) {
  for (const auto& [key, word] : c.words) {
    const auto& u = unmask_axis().keys;
    if (std::find(u.begin(), u.end(), key) == u.end() && key != transfer_axis().keys[0] &&
        key != sampler_axis().keys[0] && key != cache_axis().keys[0])
      throw StrategyError(key, "'" + key + "' is not a strategy axis");
  }
  // Which positions: the keys are synonyms.
  std::optional<UnmaskWord> unmask;
  std::string unmask_key;
  for (std::string_view k : unmask_axis().keys) {
    const std::string key(k);
    auto v = word_of(c, unmask_axis(), key);
    if (!v) continue;
    if (unmask && !(*unmask == *v))
      throw StrategyError(key, "'" + c.words.at(key) + "' contradicts " + unmask_key + " '" +
                                   c.words.at(unmask_key) +
                                   "': both name which positions are revealed first; give one");
    unmask = v;
    unmask_key = key;
  }
  if (unmask) {
    p.unmask = unmask->unmask;
    if (unmask->transfer != Transfer::kDefault) p.transfer = unmask->transfer;
  }
  // How many per step.
  const std::string schedule_key(transfer_axis().keys[0]);
  const auto schedule = word_of(c, transfer_axis(), schedule_key);
  if (schedule) p.transfer = *schedule;
  if (c.threshold && c.factor)
    throw StrategyError("factor", "the threshold and the factor rules are two different rules; give one");
  auto number = [&](const char* key, Transfer rule) {
    if (schedule && *schedule != rule)
      throw StrategyError(key, std::string("a ") + key + " is for the " + key + " rule, but " + schedule_key +
                                   " is '" + c.words.at(schedule_key) + "'");
    p.transfer = rule;
  };
  if (c.threshold) {
    if (!(*c.threshold > 0 && *c.threshold <= 1))
      throw StrategyError("threshold", "must be in (0, 1], got " + format_number(*c.threshold));
    number("threshold", Transfer::kThreshold);
    p.threshold = *c.threshold;
    p.block_threshold =
        *c.threshold;  // the block loops' threshold (LLaDA2's and SDAR's own default otherwise)
  }
  if (c.factor) {
    if (!(*c.factor > 0)) throw StrategyError("factor", "must be > 0, got " + format_number(*c.factor));
    number("factor", Transfer::kFactor);
    p.factor = *c.factor;
  }
  // Which token.
  if (auto v = word_of(c, sampler_axis(), std::string(sampler_axis().keys[0]))) p.sampler = *v;
  // What is recomputed.
  if (auto v = word_of(c, cache_axis(), std::string(cache_axis().keys[0]))) p.cache = *v;
}

}  // namespace dllm
