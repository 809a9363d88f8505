#include "tokenizer/unicode.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode_tables.h"
#include "tokenizer/utf8.h"

namespace dllm::tok {

namespace ud = unicode_data;

namespace {

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

uint8_t ccc_of(uint32_t cp) {
  if (cp < 0x300) return 0;
  const ud::CccEntry* end = ud::kCcc + ud::kCccSize;
  auto it = std::lower_bound(ud::kCcc, end, cp, [](const ud::CccEntry& e, uint32_t c) { return e.cp < c; });
  return (it != end && it->cp == cp) ? it->ccc : 0;
}

const ud::DecompEntry* find_decomp(const ud::DecompEntry* table, size_t size, uint32_t cp) {
  const ud::DecompEntry* end = table + size;
  auto it = std::lower_bound(table, end, cp, [](const ud::DecompEntry& e, uint32_t c) { return e.cp < c; });
  return (it != end && it->cp == cp) ? it : nullptr;
}

void decompose(uint32_t cp, bool compat, std::vector<uint32_t>& out) {
  if (cp < 0xA0) {
    out.push_back(cp);
    return;
  }
  if (cp >= kSBase && cp < kSBase + kSCount) {
    uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (compat) {
    if (const auto* e = find_decomp(ud::kCompat, ud::kCompatSize, cp)) {
      out.insert(out.end(), ud::kCompatPool + e->offset, ud::kCompatPool + e->offset + e->length);
      return;
    }
  }
  if (const auto* e = find_decomp(ud::kCanon, ud::kCanonSize, cp)) {
    out.insert(out.end(), ud::kCanonPool + e->offset, ud::kCanonPool + e->offset + e->length);
    return;
  }
  out.push_back(cp);
}

bool compose_pair(uint32_t a, uint32_t b, uint32_t* out) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    *out = kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    return true;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    *out = a + (b - kTBase);
    return true;
  }
  const ud::CompEntry* end = ud::kComp + ud::kCompSize;
  auto it = std::lower_bound(ud::kComp, end, std::make_pair(a, b),
                             [](const ud::CompEntry& e, std::pair<uint32_t, uint32_t> k) {
                               return e.first < k.first || (e.first == k.first && e.second < k.second);
                             });
  if (it != end && it->first == a && it->second == b) {
    *out = it->composite;
    return true;
  }
  return false;
}

}  // namespace

const char* unicode_tables_version() {
  return ud::kUnicodeVersion;
}

namespace {

std::string normalize_chunk(std::string_view s, NormForm form) {
  bool compat = form == NormForm::NFKC || form == NormForm::NFKD;
  bool compose = form == NormForm::NFC || form == NormForm::NFKC;

  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) decompose(utf8_next(s, i), compat, cps);

  // Canonical ordering: stable sort of each run of non-starters by combining class.
  std::vector<uint8_t> ccc(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) ccc[i] = ccc_of(cps[i]);
  for (size_t i = 0; i < cps.size();) {
    if (ccc[i] == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && ccc[j] != 0) ++j;
    if (j - i > 1) {
      std::vector<std::pair<uint8_t, uint32_t>> run;
      for (size_t k = i; k < j; ++k) run.emplace_back(ccc[k], cps[k]);
      std::stable_sort(run.begin(), run.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      for (size_t k = i; k < j; ++k) {
        ccc[k] = run[k - i].first;
        cps[k] = run[k - i].second;
      }
    }
    i = j;
  }

  if (compose && !cps.empty()) {
    // Canonical composition (UAX #15): a character combines with the last starter unless blocked.
    size_t starter = 0;
    bool have_starter = ccc[0] == 0;
    size_t w = 1;
    int last_ccc = have_starter ? 0 : 256;  // ccc of the last character written after the starter
    for (size_t r = 1; r < cps.size(); ++r) {
      uint32_t c = cps[r];
      int cc = ccc[r];
      uint32_t composite = 0;
      bool blocked = have_starter && w - 1 != starter && (last_ccc == 0 || last_ccc >= cc);
      if (have_starter && !blocked && compose_pair(cps[starter], c, &composite)) {
        cps[starter] = composite;
        continue;
      }
      if (cc == 0) {
        starter = w;
        have_starter = true;
        last_ccc = 0;
      } else {
        last_ccc = cc;
      }
      cps[w] = c;
      ccc[w] = static_cast<uint8_t>(cc);
      ++w;
    }
    cps.resize(w);
  }

  std::string out;
  out.reserve(s.size() + 8);
  for (uint32_t cp : cps) utf8_append(out, cp);
  return out;
}

}  // namespace

// ASCII characters are never decomposed, reordered or composed onto a previous character (no composition has
// an ASCII second element), so only the non-ASCII runs, each with the ASCII character before it, need the
// full algorithm.
std::string unicode_normalize(std::string_view s, NormForm form) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size() && static_cast<unsigned char>(s[j]) < 0x80) ++j;
    if (j == s.size()) {
      out.append(s.substr(i));
      break;
    }
    size_t start = j > i ? j - 1 : j;  // the ASCII character before the run may compose with it
    out.append(s.substr(i, start - i));
    size_t k = j;
    while (k < s.size() && static_cast<unsigned char>(s[k]) >= 0x80) ++k;
    out += normalize_chunk(s.substr(start, k - start), form);
    i = k;
  }
  return out;
}

}  // namespace dllm::tok
