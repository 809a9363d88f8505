#include "tokenizer/post_processor.h"

#include <map>

namespace dllm::tok {

namespace {

class IdentityProcessor : public PostProcessor {
 public:
  void process(std::vector<int32_t>&) const override {}
};

// The "single" template flattened: a run of fixed ids, the sequence, fixed ids...
class TemplateProcessor : public PostProcessor {
 public:
  struct Item {
    bool is_sequence;
    std::vector<int32_t> ids;
  };
  explicit TemplateProcessor(std::vector<Item> items) : items_(std::move(items)) {}
  void process(std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const auto& it : items_) {
      if (it.is_sequence)
        out.insert(out.end(), ids.begin(), ids.end());
      else
        out.insert(out.end(), it.ids.begin(), it.ids.end());
    }
    ids = std::move(out);
  }

 private:
  std::vector<Item> items_;
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> items) : items_(std::move(items)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& p : items_) p->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> items_;
};

std::unique_ptr<PostProcessor> make_template(const JNode& node) {
  std::map<std::string, std::vector<int32_t>> specials;
  if (auto st = node.opt("special_tokens")) {
    st->expect_object();
    for (auto it = st->json().begin(); it != st->json().end(); ++it) {
      JNode entry(it.value(), st->file(), st->path() + "[" + nlohmann::json(it.key()).dump() + "]");
      JNode ids = entry["ids"];
      std::vector<int32_t> v;
      for (size_t i = 0; i < ids.size(); ++i) v.push_back(ids.at(i).id());
      specials[it.key()] = std::move(v);
    }
  }
  JNode single = node["single"];
  std::vector<TemplateProcessor::Item> items;
  for (size_t i = 0; i < single.size(); ++i) {
    JNode piece = single.at(i);
    if (auto seq = piece.opt("Sequence")) {
      const std::string& id = (*seq)["id"].str();
      if (id != "A") (*seq)["id"].fail("a single-sequence template must use sequence 'A', got '", id, "'");
      items.push_back({true, {}});
    } else if (auto sp = piece.opt("SpecialToken")) {
      JNode idn = (*sp)["id"];
      auto it = specials.find(idn.str());
      if (it == specials.end()) idn.fail("special token '", idn.str(), "' is not in special_tokens");
      items.push_back({false, it->second});
    } else {
      piece.fail("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  return std::make_unique<TemplateProcessor>(std::move(items));
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const JNode& node) {
  const std::string& type = node["type"].str();
  if (type == "ByteLevel") return std::make_unique<IdentityProcessor>();
  if (type == "TemplateProcessing") return make_template(node);
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    // "cls": ["<s>", 0], "sep": ["</s>", 2]
    JNode cls = node["cls"], sep = node["sep"];
    if (cls.size() != 2) cls.fail("expected [token, id]");
    if (sep.size() != 2) sep.fail("expected [token, id]");
    std::vector<TemplateProcessor::Item> items{
        {false, {cls.at(1).id()}}, {true, {}}, {false, {sep.at(1).id()}}};
    return std::make_unique<TemplateProcessor>(std::move(items));
  }
  if (type == "Sequence") {
    JNode list = node["processors"];
    std::vector<std::unique_ptr<PostProcessor>> items;
    for (size_t i = 0; i < list.size(); ++i) items.push_back(make_post_processor(list.at(i)));
    return std::make_unique<SequenceProcessor>(std::move(items));
  }
  node["type"].fail("unsupported post-processor '", type, "'");
}

}  // namespace dllm::tok
