// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): vocab, merges, byte_fallback, unk
// handling, continuing_subword_prefix / end_of_word_suffix and ignore_merges. Merging runs in O(n log n) per
// word.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_path.h"

namespace dllm::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using VocabMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Open-addressing map from a pair of token ids to (rank, merged id).
class MergeTable {
 public:
  struct Value {
    int32_t rank;
    int32_t id;
  };
  void reserve(size_t n);
  void insert(int32_t a, int32_t b, Value v);
  const Value* find(int32_t a, int32_t b) const {
    if (slots_.empty()) return nullptr;
    uint64_t key = make_key(a, b);
    size_t i = hash(key) & mask_;
    while (true) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    Value value{0, 0};
  };
  static uint64_t make_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static size_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

class BpeModel {
 public:
  // Parses the "model" object; errors name the JSON path.
  static BpeModel load(const JNode& model);

  // Appends the ids of one pre-token (already normalized / byte-level mapped).
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const {
    auto it = vocab_.find(token);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
  }
  // nullptr when the id is not in the vocab.
  const std::string* id_to_token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[id]) return nullptr;
    return &id_to_token_[id];
  }
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }

 private:
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    uint32_t len;  // bytes of the original word covered
  };
  void initial_symbols(std::string_view word, std::vector<Symbol>& syms) const;
  void merge(std::vector<Symbol>& syms) const;
  void tokenize_word(std::string_view word, std::vector<int32_t>& out) const;

  VocabMap vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  MergeTable merges_;
  std::unordered_map<uint32_t, int32_t> char_ids_;  // single code point tokens (no prefix/suffix)
  std::optional<int32_t> unk_id_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  // SentencePiece-style vocabularies: when no token has a "▁" right after another character (except in runs
  // of "▁"), BPE cannot merge across such a boundary, so a long segment is split there first (same result).
  bool split_at_metaspace_ = false;
  // Identifies this model in the per-thread cache of merged words (unique per load, survives moves).
  uint64_t cache_id_ = 0;
  int32_t byte_ids_[256];  // <0xNN> tokens for byte_fallback, -1 when absent
};

}  // namespace dllm::tok
