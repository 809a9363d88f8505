#include "tokenizer/normalizers.h"

#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace dllm::tok {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty() || s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

namespace {

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormForm f) : form_(f) {}
  void normalize(std::string& s) const override { s = unicode_normalize(s, form_); }

 private:
  NormForm form_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string p) : prefix_(std::move(p)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::string from, std::string to, std::unique_ptr<Regex> re)
      : from_(std::move(from)), to_(std::move(to)), re_(std::move(re)) {}
  void normalize(std::string& s) const override {
    if (!re_) {
      replace_all(s, from_, to_);
      return;
    }
    std::string out;
    size_t prev = 0;
    re_->for_each_match(s, [&](size_t b, size_t e) {
      out.append(s, prev, b - prev);
      out.append(to_);
      prev = e;
    });
    out.append(s, prev, std::string::npos);
    s = std::move(out);
  }

 private:
  std::string from_, to_;
  std::unique_ptr<Regex> re_;
};

bool is_unicode_space(uint32_t cp) {
  return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& s) const override {
    size_t b = 0, e = s.size();
    if (left_) {
      while (b < e) {
        size_t i = b;
        if (!is_unicode_space(utf8_next(s, i))) break;
        b = i;
      }
    }
    if (right_) {
      while (e > b) {
        size_t i = e - 1;
        while (i > b && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
        size_t j = i;
        if (!is_unicode_space(utf8_next(s, j))) break;
        e = i;
      }
    }
    s = s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> items) : items_(std::move(items)) {}
  void normalize(std::string& s) const override {
    for (const auto& n : items_) n->normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const JNode& node) {
  const std::string& type = node["type"].str();
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormForm::NFKD);
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(node["prepend"].str());
  if (type == "Replace") {
    JNode pat = node["pattern"];
    std::string to = node["content"].str();
    if (auto s = pat.opt("String")) return std::make_unique<ReplaceNormalizer>(s->str(), to, nullptr);
    if (auto r = pat.opt("Regex")) {
      return std::make_unique<ReplaceNormalizer>(
          "", to, std::make_unique<Regex>(r->str(), r->file() + ": " + r->path()));
    }
    pat.fail("expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (type == "Strip")
    return std::make_unique<StripNormalizer>(node.get_bool("strip_left", false),
                                             node.get_bool("strip_right", false));
  if (type == "Sequence") {
    JNode list = node["normalizers"];
    std::vector<std::unique_ptr<Normalizer>> items;
    for (size_t i = 0; i < list.size(); ++i) items.push_back(make_normalizer(list.at(i)));
    return std::make_unique<SequenceNormalizer>(std::move(items));
  }
  node["type"].fail("unsupported normalizer '", type, "'");
}

}  // namespace dllm::tok
