#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/file.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoders.h"
#include "tokenizer/json_path.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/utf8.h"

namespace dllm {

using namespace tok;

struct Tokenizer::Impl {
  BpeModel model;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  AddedTokenMatcher raw_matcher;   // added tokens with normalized=false: matched on the raw text
  AddedTokenMatcher norm_matcher;  // normalized=true: matched on each normalized segment
  std::unordered_map<int32_t, std::string> added_by_id;
  std::unordered_map<std::string, int32_t> added_by_content;
  std::unordered_set<int32_t> special;
  int32_t vocab_size = 0;

  void encode_text(const std::string& s, bool at_start, std::vector<int32_t>& ids) const {
    thread_local std::vector<Piece> pieces;
    pieces.clear();
    pieces.push_back({s, at_start});
    if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
    for (const auto& p : pieces) model.tokenize(p.text, ids);
  }
};

Tokenizer Tokenizer::load(const std::string& path) {
  std::string file = path;
  if (std::filesystem::is_directory(path)) file = (std::filesystem::path(path) / "tokenizer.json").string();
  return from_json_text(read_whole_file(file), file);
}

Tokenizer Tokenizer::from_json_text(std::string_view json_text, const std::string& name) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    fail(name, ": invalid JSON: ", e.what());
  }
  JNode root(doc, name);
  root.expect_object();
  auto impl = std::make_shared<Impl>();

  JNode model = root["model"];
  if (auto t = model.opt("type")) {
    if (t->str() != "BPE") t->fail("unsupported model type '", t->str(), "' (only BPE is supported)");
  } else if (!model.json().contains("merges")) {
    model.fail("missing model type (only BPE is supported)");
  }
  impl->model = BpeModel::load(model);
  impl->vocab_size = impl->model.max_id() + 1;

  if (auto n = root.opt("normalizer")) impl->normalizer = make_normalizer(*n);
  if (auto p = root.opt("pre_tokenizer")) impl->pre_tokenizer = make_pre_tokenizer(*p);
  if (auto p = root.opt("post_processor")) impl->post_processor = make_post_processor(*p);
  if (auto d = root.opt("decoder")) impl->decoder = make_decoder(*d);

  std::vector<AddedToken> raw, norm;
  if (auto list = root.opt("added_tokens")) {
    for (size_t i = 0; i < list->size(); ++i) {
      JNode t = list->at(i);
      AddedToken a;
      a.id = t["id"].id();
      a.content = t["content"].str();
      if (a.content.empty()) t["content"].fail("added token content is empty");
      if (!utf8_is_valid(a.content)) t["content"].fail("added token content is not valid UTF-8");
      a.single_word = t.get_bool("single_word", false);
      a.lstrip = t.get_bool("lstrip", false);
      a.rstrip = t.get_bool("rstrip", false);
      a.special = t.get_bool("special", false);
      a.normalized = t.get_bool("normalized", !a.special);
      impl->added_by_id[a.id] = a.content;
      impl->added_by_content[a.content] = a.id;
      if (a.special) impl->special.insert(a.id);
      impl->vocab_size = std::max(impl->vocab_size, a.id + 1);
      // Without a normalizer, "normalized" makes no difference.
      if (a.normalized && impl->normalizer) {
        // As in HF, a normalized token is looked for in normalized text, in its normalized form, which is
        // also what id_to_token and decode give (token_to_id still takes the original content).
        impl->normalizer->normalize(a.content);
        impl->added_by_id[a.id] = a.content;
        if (!a.content.empty()) norm.push_back(std::move(a));
      } else {
        raw.push_back(std::move(a));
      }
    }
  }
  impl->raw_matcher = AddedTokenMatcher(std::move(raw));
  impl->norm_matcher = AddedTokenMatcher(std::move(norm));
  return Tokenizer(std::move(impl));
}

const Tokenizer::Impl& Tokenizer::impl() const {
  if (!impl_) fail("tokenizer: used before Tokenizer::load()");
  return *impl_;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& m = impl();
  std::string repaired;
  if (!utf8_is_valid(text)) {
    repaired = utf8_lossy(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> segs, sub;
  m.raw_matcher.split(text, segs);
  std::string s;
  for (const auto& seg : segs) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    s.assign(text.substr(seg.begin, seg.end - seg.begin));
    bool at_start = seg.begin == 0;
    if (m.normalizer) m.normalizer->normalize(s);
    if (s.empty()) continue;
    if (m.norm_matcher.empty()) {
      m.encode_text(s, at_start, ids);
      continue;
    }
    m.norm_matcher.split(s, sub);
    for (const auto& ss : sub) {
      if (ss.id >= 0)
        ids.push_back(ss.id);
      else
        m.encode_text(s.substr(ss.begin, ss.end - ss.begin), at_start && ss.begin == 0, ids);
    }
  }
  if (add_special_tokens && m.post_processor) m.post_processor->process(ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& m = impl();
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    auto it = m.added_by_id.find(id);
    if (it != m.added_by_id.end()) {
      if (skip_special_tokens && m.special.count(id)) continue;
      tokens.push_back(it->second);
      continue;
    }
    if (const std::string* t = m.model.id_to_token(id)) tokens.push_back(*t);
  }
  std::string out;
  if (m.decoder) {
    m.decoder->decode_chain(tokens);
    for (const auto& t : tokens) out += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
  }
  return out;
}

int32_t Tokenizer::vocab_size() const {
  return impl().vocab_size;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  const Impl& m = impl();
  auto it = m.added_by_content.find(std::string(token));
  if (it != m.added_by_content.end()) return it->second;
  return m.model.token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const Impl& m = impl();
  auto it = m.added_by_id.find(id);
  if (it != m.added_by_id.end()) return it->second;
  const std::string* t = m.model.id_to_token(id);
  return t ? *t : std::string();
}

bool Tokenizer::is_special(int32_t id) const {
  return impl().special.count(id) != 0;
}

std::vector<int32_t> Tokenizer::special_ids() const {
  const Impl& m = impl();
  std::vector<int32_t> v(m.special.begin(), m.special.end());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace dllm
