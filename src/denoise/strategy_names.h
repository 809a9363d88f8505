// The words of the strategy axes: one name <-> value table per axis, read by every front end. The `dllm`
// flags (tools/cli/denoise_flags.cpp: --unmask/--alg/--remasking, --schedule, --cache), the HTTP request
// fields (src/server/request.cpp: the same names without dashes), --help and docs/denoising.md all list these
// tables, so a word means the same thing wherever it is given. Words the front ends accepted before the
// tables existed stay as aliases (an alias is a later entry with the value of an earlier one).
//
//   Unmask u = unmask_axis().parse("maskgit_plus", "--alg").unmask;   // Unmask::kConfidence
//   CacheMode c = cache_axis().find("dual").value();
//   apply_strategy(choice, params);  // what a front end received -> GenerateParams, one rule for all
#pragma once

#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dllm/dllm.h"

namespace dllm {

template <class V>
struct NamedValue {
  std::string_view name;
  V value;
  std::string_view help;  // one line
};

// What a word of the "which positions" axis selects. Dream's alg=origin is a random order whose count per
// step is a Bernoulli draw, so that word picks the "how many" rule too (kDefault: a word leaves that axis
// alone).
struct UnmaskWord {
  Unmask unmask = Unmask::kDefault;
  Transfer transfer = Transfer::kDefault;
  bool operator==(const UnmaskWord&) const = default;
};

template <class V>
struct StrategyAxis {
  std::string_view name;                 // "unmask"
  std::string_view what;                 // "which masked positions are revealed first"
  std::vector<std::string_view> keys;    // the flag (with --) / request field names that take these words
  std::span<const NamedValue<V>> words;  // canonical words, then aliases

  std::optional<V> find(std::string_view word) const;
  // The word's value, or dllm::Error "WHERE: 'word' is not one of a, b, c (aliases: x = a, ...)".
  V parse(std::string_view word, std::string_view where) const;
  // The first word with `word`'s value: itself unless it is an alias.
  std::string_view canonical(std::string_view word) const;
  bool is_alias(const NamedValue<V>& w) const { return canonical(w.name) != w.name; }
  std::string names(std::string_view separator = " | ") const;  // canonical words
  std::string accepted() const;                                 // "a, b, c (aliases: x = a, y = b)"
};

const StrategyAxis<UnmaskWord>& unmask_axis();  // --unmask, --alg, --remasking
const StrategyAxis<Transfer>& transfer_axis();  // --schedule
const StrategyAxis<Sampler>& sampler_axis();    // --sampler
const StrategyAxis<CacheMode>& cache_axis();    // --cache

// The block-diffusion loops (--block-loop, GenerateParams::block_loop): llada2.0, llada2.1, sdar. Not a
// strategy axis (it picks a whole official loop), so not in apply_strategy; the same find / parse / accepted.
const StrategyAxis<BlockLoop>& block_loop_words();

// The markdown list of every axis and word that docs/denoising.md carries between its "strategy words"
// markers (tests/denoise/strategy_names_test.cpp checks the doc holds exactly this).
std::string strategy_words_markdown();

// The strategy words and numbers one front end received (only those given), keyed by flag / field name
// without dashes ("alg", "schedule", "cache", ...).
struct StrategyChoice {
  std::map<std::string, std::string> words;
  std::optional<double> threshold, factor;
};
// A word or number at fault, and which key gave it.
struct StrategyError : std::runtime_error {
  StrategyError(std::string key, const std::string& message)
      : std::runtime_error(message), key(std::move(key)) {}
  std::string key;
};
// Applies a choice to params, the same way for every front end: the keys of one axis (unmask, alg, remasking)
// are synonyms and must agree; a --schedule word overrides the count rule an unmask word implies (origin);
// threshold / factor select their rule (one of the two; a schedule word given with them must name that rule).
// Throws StrategyError naming the key (the message does not repeat it).
void apply_strategy(const StrategyChoice& choice, GenerateParams& params);

}  // namespace dllm
