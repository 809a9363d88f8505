#include "tokenizer/decoders.h"

#include "tokenizer/normalizers.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace dllm::tok {

namespace {

const char* const kReplacementChar = "\xEF\xBF\xBD";

class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      size_t mark = bytes.size();
      bool ok = true;
      for (size_t i = 0; i < t.size();) {
        int b = byte_level_byte(utf8_next(t, i));
        if (b < 0) {
          ok = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      if (!ok) {  // a token that is not byte-level text (e.g. an added token) is taken as is
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::string from, std::string to, std::unique_ptr<Regex> re)
      : from_(std::move(from)), to_(std::move(to)), re_(std::move(re)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      if (!re_) {
        replace_all(t, from_, to_);
        continue;
      }
      std::string out;
      size_t prev = 0;
      re_->for_each_match(t, [&](size_t b, size_t e) {
        out.append(t, prev, b - prev);
        out.append(to_);
        prev = e;
      });
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string from_, to_;
  std::unique_ptr<Regex> re_;
};

int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; ++k) {
    char c = t[k];
    int d = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                     : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (utf8_is_valid(pending)) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending.size(); ++k) out.emplace_back(kReplacementChar);
      }
      pending.clear();
    };
    for (auto& t : tokens) {
      int b = parse_byte_token(t);
      if (b >= 0) {
        pending.push_back(static_cast<char>(b));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(uint32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<std::pair<size_t, uint32_t>> chars;  // (byte offset, code point)
      for (size_t i = 0; i < t.size();) {
        size_t at = i;
        chars.emplace_back(at, utf8_next(t, i));
      }
      size_t start_cut = 0;
      for (size_t k = 0; k < start_ && k < chars.size(); ++k) {
        if (chars[k].second != content_) break;
        start_cut = k + 1;
      }
      size_t stop_cut = chars.size();
      for (size_t k = 0; k < stop_ && k < chars.size(); ++k) {
        size_t idx = chars.size() - k - 1;
        if (chars[idx].second != content_) break;
        stop_cut = idx;
      }
      if (stop_cut <= start_cut) {
        t.clear();
        continue;
      }
      size_t b = start_cut < chars.size() ? chars[start_cut].first : t.size();
      size_t e = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  uint32_t content_;
  size_t start_, stop_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      replace_all(tokens[i], replacement_, (i == 0 && strip_first_) ? "" : " ");
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class BpeSuffixDecoder : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> items) : items_(std::move(items)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : items_) d->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> items_;
};

uint32_t single_char(const JNode& n) {
  const std::string& s = n.str();
  size_t i = 0;
  if (s.empty()) n.fail("expected a single character");
  uint32_t cp = utf8_next(s, i);
  if (i != s.size()) n.fail("expected a single character, got \"", s, "\"");
  return cp;
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const JNode& node) {
  const std::string& type = node["type"].str();
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Replace") {
    JNode pat = node["pattern"];
    std::string to = node["content"].str();
    if (auto s = pat.opt("String")) return std::make_unique<ReplaceDecoder>(s->str(), to, nullptr);
    if (auto r = pat.opt("Regex"))
      return std::make_unique<ReplaceDecoder>(
          "", to, std::make_unique<Regex>(r->str(), r->file() + ": " + r->path()));
    pat.fail("expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (type == "Strip") {
    int64_t start = node.get_int("start", 0), stop = node.get_int("stop", 0);
    if (start < 0) node["start"].fail("must be >= 0");
    if (stop < 0) node["stop"].fail("must be >= 0");
    return std::make_unique<StripDecoder>(single_char(node["content"]), static_cast<size_t>(start),
                                          static_cast<size_t>(stop));
  }
  if (type == "Metaspace") {
    bool strip_first = true;
    if (auto ps = node.opt("prepend_scheme")) {
      strip_first = ps->str() != "never";
    } else if (auto aps = node.opt("add_prefix_space")) {
      strip_first = aps->boolean();
    }
    return std::make_unique<MetaspaceDecoder>(node.get_str("replacement", "\xE2\x96\x81"), strip_first);
  }
  if (type == "BPEDecoder") return std::make_unique<BpeSuffixDecoder>(node.get_str("suffix", "</w>"));
  if (type == "Sequence") {
    JNode list = node["decoders"];
    std::vector<std::unique_ptr<Decoder>> items;
    for (size_t i = 0; i < list.size(); ++i) items.push_back(make_decoder(list.at(i)));
    return std::make_unique<SequenceDecoder>(std::move(items));
  }
  node["type"].fail("unsupported decoder '", type, "'");
}

}  // namespace dllm::tok
