#include "tokenizer/pre_tokenizers.h"

#include <unordered_map>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace dllm::tok {

namespace {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct ByteLevelTable {
  std::array<std::string, 256> chars;
  std::unordered_map<uint32_t, int> inverse;
  ByteLevelTable() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
      utf8_append(chars[b], cp);
      inverse[cp] = b;
    }
  }
};

const ByteLevelTable& table() {
  static const ByteLevelTable t;
  return t;
}

// prefix + s (std::string::insert(0, ...) trips a GCC 12 -Wrestrict false positive at -O3).
std::string prepended(std::string_view prefix, const std::string& s) {
  std::string out;
  out.reserve(prefix.size() + s.size());
  out.append(prefix);
  out.append(s);
  return out;
}

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const JNode& n) {
  const std::string& s = n.str();
  if (s == "Removed") return Behavior::Removed;
  if (s == "Isolated") return Behavior::Isolated;
  if (s == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::MergedWithNext;
  if (s == "Contiguous") return Behavior::Contiguous;
  n.fail("unsupported split behavior '", s, "'");
}

struct Span {
  size_t b, e;
  bool match;
};

// Splits every piece at the matches of `re`, like HF's NormalizedString::split.
void split_pieces(std::vector<Piece>& pieces, const Regex& re, Behavior behavior, bool invert) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  std::vector<Span> spans;
  for (auto& piece : pieces) {
    const std::string& s = piece.text;
    spans.clear();
    size_t prev = 0;
    re.for_each_match(s, [&](size_t b, size_t e) {
      if (prev != b) spans.push_back({prev, b, invert});
      spans.push_back({b, e, !invert});
      prev = e;
    });
    if (prev != s.size()) spans.push_back({prev, s.size(), invert});

    std::vector<Span> kept;  // spans to keep (match flag unused afterwards)
    switch (behavior) {
      case Behavior::Removed:
        for (const auto& sp : spans)
          if (!sp.match) kept.push_back(sp);
        break;
      case Behavior::Isolated:
        kept = spans;
        break;
      case Behavior::MergedWithPrevious: {
        bool prev_match = false;
        for (const auto& sp : spans) {
          if (sp.match && !prev_match && !kept.empty()) {
            kept.back().e = sp.e;
          } else {
            kept.push_back(sp);
          }
          prev_match = sp.match;
        }
        break;
      }
      case Behavior::MergedWithNext: {
        bool prev_match = false;
        for (size_t k = spans.size(); k-- > 0;) {
          const auto& sp = spans[k];
          if (sp.match && !prev_match && !kept.empty()) {
            kept.back().b = sp.b;
          } else {
            kept.push_back(sp);
          }
          prev_match = sp.match;
        }
        std::reverse(kept.begin(), kept.end());
        break;
      }
      case Behavior::Contiguous: {
        bool prev_match = false;
        for (const auto& sp : spans) {
          if (sp.match == prev_match && !kept.empty()) {
            kept.back().e = sp.e;
          } else {
            kept.push_back(sp);
          }
          prev_match = sp.match;
        }
        break;
      }
    }
    for (const auto& sp : kept) {
      if (sp.e > sp.b) out.push_back({s.substr(sp.b, sp.e - sp.b), piece.at_start && sp.b == 0});
    }
  }
  pieces = std::move(out);
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> re, Behavior b, bool invert)
      : re_(std::move(re)), behavior_(b), invert_(invert) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_pieces(pieces, *re_, behavior_, invert_);
  }

 private:
  std::unique_ptr<Regex> re_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex, const std::string& where)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) re_ = std::make_unique<Regex>(kGpt2Pattern, where);
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_) {
      for (auto& p : pieces)
        if (p.text.empty() || p.text[0] != ' ') p.text = prepended(" ", p.text);
    }
    if (re_) split_pieces(pieces, *re_, Behavior::Isolated, false);
    const auto& chars = table().chars;
    std::string mapped;
    for (auto& p : pieces) {
      mapped.clear();
      mapped.reserve(p.text.size() * 2);
      for (char c : p.text) mapped += chars[static_cast<unsigned char>(c)];
      std::swap(p.text, mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;
};

enum class PrependScheme { Always, First, Never };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)),
        scheme_(scheme),
        split_(split),
        re_(regex_escape(replacement_), "Metaspace") {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (auto& p : pieces) {
      std::string out;
      for (char c : p.text) {
        if (c == ' ')
          out += replacement_;
        else
          out += c;
      }
      bool starts = out.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && p.at_start)))
        out = prepended(replacement_, out);
      p.text = std::move(out);
    }
    if (split_) split_pieces(pieces, re_, Behavior::MergedWithNext, false);
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  Regex re_;
};

class RegexPreTokenizer : public PreTokenizer {
 public:
  RegexPreTokenizer(const std::string& pattern, Behavior b, bool invert)
      : re_(pattern, "pre-tokenizer"), behavior_(b), invert_(invert) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_pieces(pieces, re_, behavior_, invert_);
  }

 private:
  Regex re_;
  Behavior behavior_;
  bool invert_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> items)
      : items_(std::move(items)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& p : items_) p->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

}  // namespace

const std::array<std::string, 256>& byte_level_chars() {
  return table().chars;
}

int byte_level_byte(uint32_t cp) {
  const auto& inv = table().inverse;
  auto it = inv.find(cp);
  return it == inv.end() ? -1 : it->second;
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JNode& node) {
  const std::string& type = node["type"].str();
  std::string where = node.file() + ": " + node.path();
  if (type == "Sequence") {
    JNode list = node["pretokenizers"];
    std::vector<std::unique_ptr<PreTokenizer>> items;
    for (size_t i = 0; i < list.size(); ++i) items.push_back(make_pre_tokenizer(list.at(i)));
    return std::make_unique<SequencePreTokenizer>(std::move(items));
  }
  if (type == "Split") {
    JNode pat = node["pattern"];
    std::unique_ptr<Regex> re;
    if (auto s = pat.opt("String")) {
      re = std::make_unique<Regex>(regex_escape(s->str()), where);
    } else if (auto r = pat.opt("Regex")) {
      re = std::make_unique<Regex>(r->str(), r->file() + ": " + r->path());
    } else {
      pat.fail("expected {\"String\": ...} or {\"Regex\": ...}");
    }
    return std::make_unique<SplitPreTokenizer>(std::move(re), parse_behavior(node["behavior"]),
                                               node.get_bool("invert", false));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(node.get_bool("add_prefix_space", true),
                                                   node.get_bool("use_regex", true), where);
  }
  if (type == "Metaspace") {
    std::string replacement = node.get_str("replacement", "\xE2\x96\x81");
    PrependScheme scheme = PrependScheme::Always;
    if (auto ps = node.opt("prepend_scheme")) {
      const std::string& s = ps->str();
      if (s == "always")
        scheme = PrependScheme::Always;
      else if (s == "first")
        scheme = PrependScheme::First;
      else if (s == "never")
        scheme = PrependScheme::Never;
      else
        ps->fail("unsupported prepend_scheme '", s, "'");
    } else if (auto aps = node.opt("add_prefix_space")) {
      scheme = aps->boolean() ? PrependScheme::Always : PrependScheme::Never;
    }
    return std::make_unique<MetaspacePreTokenizer>(replacement, scheme, node.get_bool("split", true));
  }
  if (type == "Whitespace")
    return std::make_unique<RegexPreTokenizer>(R"(\w+|[^\w\s]+)", Behavior::Removed, true);
  if (type == "WhitespaceSplit")
    return std::make_unique<RegexPreTokenizer>(R"(\s+)", Behavior::Removed, false);
  if (type == "Digits") {
    bool individual = node.get_bool("individual_digits", false);
    return std::make_unique<RegexPreTokenizer>(individual ? R"(\p{N})" : R"(\p{N}+)", Behavior::Isolated,
                                               false);
  }
  if (type == "Punctuation") {
    Behavior b = Behavior::Isolated;
    if (auto bn = node.opt("behavior")) b = parse_behavior(*bn);
    return std::make_unique<RegexPreTokenizer>(R"([\p{P}!-/:-@\[-`{-~])", b, false);
  }
  if (type == "CharDelimiterSplit") {
    return std::make_unique<RegexPreTokenizer>(regex_escape(node["delimiter"].str()), Behavior::Removed,
                                               false);
  }
  node["type"].fail("unsupported pre-tokenizer '", type, "'");
}

}  // namespace dllm::tok
