#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <atomic>
#include <queue>

#include "tokenizer/utf8.h"

namespace dllm::tok {

void MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  count_ = 0;
}

void MergeTable::insert(int32_t a, int32_t b, Value v) {
  if ((count_ + 1) * 2 > slots_.size()) {
    std::vector<Slot> old = std::move(slots_);
    reserve(std::max<size_t>(old.size(), 16));
    for (const auto& s : old)
      if (s.key != kEmpty)
        insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key & 0xffffffffu), s.value);
  }
  uint64_t key = make_key(a, b);
  size_t i = hash(key) & mask_;
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
  if (slots_[i].key == kEmpty) ++count_;
  slots_[i].key = key;
  slots_[i].value = v;  // a repeated pair keeps the last rank, as in HF
}

BpeModel BpeModel::load(const JNode& model) {
  static std::atomic<uint64_t> next_cache_id{1};
  BpeModel m;
  m.cache_id_ = next_cache_id++;
  if (auto d = model.opt("dropout")) {
    if (d->number() != 0.0) d->fail("BPE dropout is not supported (only null or 0)");
  }
  JNode vocab = model["vocab"];
  vocab.expect_object();
  m.vocab_.reserve(vocab.json().size());
  int32_t max_id = -1;
  auto max_entry = vocab.json().end();
  const auto entry = [&](auto it) {
    return JNode(it.value(), vocab.file(), vocab.path() + "[" + nlohmann::json(it.key()).dump() + "]");
  };
  for (auto it = vocab.json().begin(); it != vocab.json().end(); ++it) {
    JNode v = entry(it);
    int32_t id = v.id();
    m.vocab_.emplace(it.key(), id);
    if (id > max_id) {
      max_id = id;
      max_entry = it;
    }
  }
  // Ids index a dense table (id -> token), so a lone id of 400 million would ask for gigabytes (found by the
  // tokenizer fuzz target). Real vocabularies are dense; a few gaps are fine.
  constexpr int64_t kMaxMissingIds = int64_t{1} << 20;
  if (max_id >= static_cast<int64_t>(vocab.json().size()) + kMaxMissingIds)
    entry(max_entry).fail("token id ", max_id, " in a vocab of ", vocab.json().size(),
              " entries: ids this sparse are not supported (at most ", kMaxMissingIds,
              " ids may be missing)");
  m.id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  m.has_id_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [tok, id] : m.vocab_) {
    m.id_to_token_[id] = tok;
    m.has_id_[id] = true;
  }

  m.continuing_subword_prefix_ = model.get_str("continuing_subword_prefix", "");
  m.end_of_word_suffix_ = model.get_str("end_of_word_suffix", "");
  m.fuse_unk_ = model.get_bool("fuse_unk", false);
  m.byte_fallback_ = model.get_bool("byte_fallback", false);
  m.ignore_merges_ = model.get_bool("ignore_merges", false);
  if (auto unk = model.opt("unk_token")) {
    auto id = m.token_to_id(unk->str());
    if (!id) unk->fail("unk_token '", unk->str(), "' is not in the vocab");
    m.unk_id_ = *id;
  }
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    auto id = m.token_to_id(buf);
    m.byte_ids_[b] = id ? *id : -1;
  }
  for (const auto& [tok, id] : m.vocab_) {
    if (tok.empty()) continue;
    size_t i = 0;
    uint32_t cp = utf8_next(tok, i);
    if (i == tok.size()) m.char_ids_[cp] = id;
  }

  {
    const std::string meta = "\xE2\x96\x81";
    bool safe = m.char_ids_.count(0x2581) != 0;
    for (auto it = m.vocab_.begin(); safe && it != m.vocab_.end(); ++it) {
      const std::string& t = it->first;
      for (size_t p = t.find(meta, 1); p != std::string::npos; p = t.find(meta, p + 1)) {
        if (p < 3 || t.compare(p - 3, 3, meta) != 0) {
          safe = false;
          break;
        }
      }
    }
    m.split_at_metaspace_ = safe;
  }

  JNode merges = model["merges"];
  size_t n = merges.size();
  m.merges_.reserve(n);
  size_t prefix_len = m.continuing_subword_prefix_.size();
  std::string a, b;
  for (size_t r = 0; r < n; ++r) {
    JNode item = merges.at(r);
    if (item.json().is_string()) {
      const std::string& s = item.str();
      size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) item.fail("expected a merge \"a b\", got \"", s, "\"");
      a.assign(s, 0, sp);
      b.assign(s, sp + 1, std::string::npos);
    } else if (item.json().is_array() && item.json().size() == 2) {
      a = item.at(0).str();
      b = item.at(1).str();
    } else {
      item.fail("expected a merge \"a b\" or [\"a\", \"b\"], got ", item.type_name());
    }
    auto ia = m.token_to_id(a);
    auto ib = m.token_to_id(b);
    if (!ia) item.fail("merge token '", a, "' is not in the vocab");
    if (!ib) item.fail("merge token '", b, "' is not in the vocab");
    std::string merged = a + (b.size() >= prefix_len ? b.substr(prefix_len) : b);
    auto im = m.token_to_id(merged);
    if (!im) item.fail("merged token '", merged, "' is not in the vocab");
    m.merges_.insert(*ia, *ib, {static_cast<int32_t>(r), *im});
  }
  return m;
}

void BpeModel::initial_symbols(std::string_view word, std::vector<Symbol>& syms) const {
  syms.clear();
  bool have_unk = false;  // a pending unk symbol (to fuse with following unknown characters)
  uint32_t unk_len = 0;
  auto push = [&](int32_t id, uint32_t len) {
    syms.push_back({id, static_cast<int32_t>(syms.size()) - 1, static_cast<int32_t>(syms.size()) + 1, len});
  };
  bool simple = continuing_subword_prefix_.empty() && end_of_word_suffix_.empty();
  std::string buf;
  size_t i = 0;
  while (i < word.size()) {
    size_t start = i;
    uint32_t cp = utf8_next(word, i);
    if (i > word.size()) i = word.size();
    auto len = static_cast<uint32_t>(i - start);
    std::optional<int32_t> id;
    if (simple) {
      auto it = char_ids_.find(cp);
      if (it != char_ids_.end()) id = it->second;
    } else {
      buf.clear();
      if (start != 0) buf += continuing_subword_prefix_;
      buf.append(word.substr(start, len));
      if (i == word.size()) buf += end_of_word_suffix_;
      id = token_to_id(buf);
    }
    if (id) {
      if (have_unk) push(*unk_id_, unk_len);
      have_unk = false;
      push(*id, len);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (size_t k = start; k < i; ++k) all = all && byte_ids_[static_cast<unsigned char>(word[k])] >= 0;
      if (all) {
        if (have_unk) push(*unk_id_, unk_len);
        have_unk = false;
        for (size_t k = start; k < i; ++k) push(byte_ids_[static_cast<unsigned char>(word[k])], 1);
        continue;
      }
    }
    if (unk_id_) {
      if (have_unk && fuse_unk_) {
        unk_len += len;
      } else {
        if (have_unk) push(*unk_id_, unk_len);
        have_unk = true;
        unk_len = len;
      }
    }
    // Without an unk token the character is dropped, as in HF.
  }
  if (have_unk) push(*unk_id_, unk_len);
  if (!syms.empty()) syms.back().next = -1;
}

void BpeModel::merge(std::vector<Symbol>& syms) const {
  const size_t n = syms.size();
  if (n < 2) return;
  if (n <= 24) {
    // Short words: repeatedly merge the lowest-ranked (then leftmost) adjacent pair.
    int32_t head = 0;
    while (true) {
      int32_t best_rank = INT32_MAX, best_pos = -1, best_id = -1;
      for (int32_t p = head; p != -1 && syms[p].next != -1; p = syms[p].next) {
        const auto* v = merges_.find(syms[p].id, syms[syms[p].next].id);
        if (v && v->rank < best_rank) {
          best_rank = v->rank;
          best_pos = p;
          best_id = v->id;
        }
      }
      if (best_pos < 0) break;
      Symbol& s = syms[best_pos];
      Symbol& r = syms[s.next];
      s.id = best_id;
      s.len += r.len;
      r.len = 0;
      s.next = r.next;
      if (r.next != -1) syms[r.next].prev = best_pos;
    }
    return;
  }
  // Long words: a heap of candidate merges ordered by (rank, position), validated lazily.
  struct Cand {
    int32_t rank, pos, new_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  for (size_t p = 0; p + 1 < n; ++p) {
    if (const auto* v = merges_.find(syms[p].id, syms[p + 1].id))
      heap.push({v->rank, static_cast<int32_t>(p), v->id});
  }
  while (!heap.empty()) {
    Cand top = heap.top();
    heap.pop();
    Symbol& s = syms[top.pos];
    if (s.len == 0 || s.next == -1) continue;
    const auto* v = merges_.find(s.id, syms[s.next].id);
    if (!v || v->id != top.new_id || v->rank != top.rank) continue;
    Symbol& r = syms[s.next];
    s.id = top.new_id;
    s.len += r.len;
    r.len = 0;
    s.next = r.next;
    if (r.next != -1) syms[r.next].prev = top.pos;
    if (s.prev != -1) {
      if (const auto* pv = merges_.find(syms[s.prev].id, s.id)) heap.push({pv->rank, s.prev, pv->id});
    }
    if (s.next != -1) {
      if (const auto* nv = merges_.find(s.id, syms[s.next].id)) heap.push({nv->rank, top.pos, nv->id});
    }
  }
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  if (split_at_metaspace_ && word.size() > 64) {
    const std::string_view meta = "\xE2\x96\x81";
    size_t start = 0;
    for (size_t p = word.find(meta, 1); p != std::string_view::npos; p = word.find(meta, p + 3)) {
      if (p > start && (p < 3 || word.compare(p - 3, 3, meta) != 0)) {
        tokenize_word(word.substr(start, p - start), out);
        start = p;
      }
    }
    tokenize_word(word.substr(start), out);
    return;
  }
  tokenize_word(word, out);
}

namespace {

// Results of recent words, per thread (no locking; encode stays const and thread-safe). Cleared when another
// model uses the thread or when it grows large.
struct WordCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};
constexpr size_t kCacheMaxWordBytes = 256;
constexpr size_t kCacheMaxEntries = 1 << 17;

}  // namespace

void BpeModel::tokenize_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local WordCache cache;
  bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    if (cache.owner != cache_id_) {
      cache.map.clear();
      cache.owner = cache_id_;
    }
    auto it = cache.map.find(word);
    if (it != cache.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  thread_local std::vector<Symbol> syms;
  initial_symbols(word, syms);
  merge(syms);
  size_t first = out.size();
  for (int32_t p = syms.empty() ? -1 : 0; p != -1; p = syms[p].next) out.push_back(syms[p].id);
  if (cacheable) {
    if (cache.map.size() >= kCacheMaxEntries) cache.map.clear();
    cache.map.emplace(std::string(word),
                      std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
  }
}

}  // namespace dllm::tok
