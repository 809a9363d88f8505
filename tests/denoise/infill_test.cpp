// Infilling (dllm::infill): a canvas whose mask ids may sit anywhere. The prompt-then-masks layout gives
// exactly generate()'s tokens under every strategy axis; on the trained demo model the fill touches only the
// masked spans, is deterministic and matches the output recorded in tests/data/infill/demo_infill.json; the
// placeholder syntax of `dllm infill` parses as documented.
#include <gtest/gtest.h>

#include "denoise/infill_template.h"
#include "dllm/dllm.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace dllm {
namespace {

const std::string kDemo = std::string(DLLM_SOURCE_DIR) + "/models/demo";

std::shared_ptr<Model> load_f32(const std::string& path) {
  LoadOptions o;
  o.precision = Precision::kF32;
  o.backend = test::backend();
  return Model::load(path, o).value();
}

std::shared_ptr<Model> demo() {
  static std::shared_ptr<Model> m = load_f32(kDemo);
  return m;
}

// generate(prompt) and infill(prompt + gen_length masks) are the same computation.
TEST(Infill, TailLayoutEqualsGenerate) {
  for (const char* name : {"llada_tiny_f32", "dream_tiny_gqa_f32"}) {
    auto model = load_f32(test::data_path(std::string("oracle/models/") + name));
    const std::vector<int32_t> prompt = {5, 17, 42, 99, 7, 3, 250, 11};
    std::vector<GenerateParams> settings;
    GenerateParams base;
    base.gen_length = 16;
    base.block_length = 4;
    base.unmask = Unmask::kConfidence;
    settings.push_back(base);
    auto with = [&](auto fn) {
      GenerateParams p = base;
      fn(p);
      settings.push_back(p);
    };
    with([](GenerateParams& p) { p.steps = 8; });  // 2 per step
    with([](GenerateParams& p) { p.cache = CacheMode::kPrefix; });
    with([](GenerateParams& p) { p.cache = CacheMode::kDual; });
    with([](GenerateParams& p) {
      p.transfer = Transfer::kThreshold, p.threshold = 0.01, p.cache = CacheMode::kDual;
    });
    with([](GenerateParams& p) { p.transfer = Transfer::kFactor, p.factor = 2.0; });
    with([](GenerateParams& p) { p.block_length = 0, p.steps = 8, p.unmask = Unmask::kMargin; });
    for (size_t i = 0; i < settings.size(); ++i) {
      const GenerateParams& p = settings[i];
      auto gen = generate(*model, {prompt}, p);
      ASSERT_TRUE(gen.ok()) << gen.error();
      std::vector<int32_t> canvas = prompt;
      canvas.insert(canvas.end(), p.gen_length, model->info().mask_id);
      GenerateParams q = p;
      q.gen_length = 999;  // ignored: the number of masks decides
      auto fill = infill(*model, {canvas}, q);
      ASSERT_TRUE(fill.ok()) << fill.error();
      std::vector<int32_t> expected = prompt;
      expected.insert(expected.end(), gen->outputs[0].begin(), gen->outputs[0].end());
      EXPECT_EQ(fill->outputs[0], expected) << name << " setting " << i;
      EXPECT_EQ(fill->forwards, gen->forwards) << name << " setting " << i;
      EXPECT_EQ(fill->forward_tokens, gen->forward_tokens) << name << " setting " << i;
    }
  }
}

GenerateParams params_of(const nlohmann::json& kw) {
  GenerateParams p;
  p.unmask = Unmask::kConfidence;
  p.block_length = kw.value("block_length", 0);
  p.steps = kw.value("steps", 0);
  if (kw.contains("threshold")) {
    p.transfer = Transfer::kThreshold;
    p.threshold = kw["threshold"];
  }
  const std::string cache = kw.value("cache", "none");
  p.cache = cache == "dual" ? CacheMode::kDual : cache == "prefix" ? CacheMode::kPrefix : CacheMode::kNone;
  return p;
}

TEST(Infill, DemoModelFillsOnlyTheSpansAndMatchesTheRecording) {
  const auto cases = test::read_cases(test::data_path("infill/demo_infill.json"));
  ASSERT_EQ(cases.size(), 3u);
  const Tokenizer tok = Tokenizer::load(kDemo);
  const int32_t mask = demo()->info().mask_id;
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& k = cases[c];
    const auto canvas = k["canvas"].get<std::vector<int32_t>>();
    // The recorded canvas is what `dllm infill --text` builds from the text.
    const InfillCanvas built =
        build_infill_canvas(tok, parse_infill_template(k["text"].get<std::string>()), mask);
    EXPECT_EQ(built.ids, canvas) << "case " << c;
    std::vector<uint8_t> in_span(canvas.size(), 0);
    for (const auto& s : k["spans"])
      for (int64_t i = s[0].get<int64_t>(); i < s[0].get<int64_t>() + s[1].get<int64_t>(); ++i)
        in_span[i] = 1;
    for (size_t i = 0; i < canvas.size(); ++i) ASSERT_EQ(canvas[i] == mask, in_span[i] == 1) << "case " << c;

    const GenerateParams p = params_of(k["params"]);
    auto first = infill(*demo(), {canvas}, p);
    ASSERT_TRUE(first.ok()) << first.error();
    const auto& out = first->outputs[0];
    ASSERT_EQ(out.size(), canvas.size());
    for (size_t i = 0; i < canvas.size(); ++i) {
      if (in_span[i])
        EXPECT_NE(out[i], mask) << "case " << c << ": position " << i << " left masked";
      else
        EXPECT_EQ(out[i], canvas[i]) << "case " << c << ": prefix/suffix position " << i << " changed";
    }
    EXPECT_EQ(out, k["filled"].get<std::vector<int32_t>>()) << "case " << c;
    EXPECT_EQ(first->forwards, k["forwards"].get<int64_t>()) << "case " << c;
    auto again = infill(*demo(), {canvas}, p);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->outputs, first->outputs) << "case " << c << ": not deterministic";
  }
}

// Step events of an infill report canvas positions, each masked position is committed once, nothing else.
TEST(Infill, StepEventsCommitEachMaskedPositionOnce) {
  const auto k = test::read_cases(test::data_path("infill/demo_infill.json"))[1];
  const auto canvas = k["canvas"].get<std::vector<int32_t>>();
  std::vector<int> hits(canvas.size(), 0);
  auto r = infill(*demo(), {canvas}, params_of(k["params"]), [&](const StepEvent& ev) {
    EXPECT_EQ((*ev.canvas)[0].size(), canvas.size());
    for (int64_t pos : (*ev.committed)[0]) ++hits.at(pos);
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.error();
  for (size_t i = 0; i < canvas.size(); ++i)
    EXPECT_EQ(hits[i], canvas[i] == demo()->info().mask_id ? 1 : 0) << i;
}

TEST(Infill, RejectsBadCanvases) {
  const int32_t m = demo()->info().mask_id;
  GenerateParams p;
  EXPECT_FALSE(infill(*demo(), {{1, 2, 3}}, p).ok());             // nothing to fill
  EXPECT_FALSE(infill(*demo(), {{1, m, 3}, {m, m, 3}}, p).ok());  // unequal mask counts
  EXPECT_FALSE(infill(*demo(), {{1, m, 3}, {m, 3}}, p).ok());     // unequal lengths
  p.block_length = 2;
  EXPECT_FALSE(infill(*demo(), {{1, m, m, m, 3}}, p).ok());  // 3 masks, block 2
  p.block_length = 0;
  p.stop_at_eos = true;
  EXPECT_FALSE(infill(*demo(), {{1, m, 3}}, p).ok());
  p.stop_at_eos = false;
  // Two rows with different span places: each row keeps its own tokens.
  auto r = infill(*demo(), {{10, m, m, 11, 12, 13}, {10, 11, 12, m, 13, m}}, p);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->outputs[0][0], 10);
  EXPECT_EQ(r->outputs[0][3], 11);
  EXPECT_EQ(r->outputs[1][2], 12);
  EXPECT_EQ(r->outputs[1][4], 13);
  for (const auto& row : r->outputs) EXPECT_EQ(std::count(row.begin(), row.end(), m), 0);
}

TEST(InfillTemplate, ParsesPlaceholders) {
  auto t = parse_infill_template("a<|mask|>b<|mask:5|><|mask:12|>c", 16);
  EXPECT_EQ(t.texts, (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(t.lengths, (std::vector<int64_t>{16, 5, 12}));
  t = parse_infill_template("<|mask|>", 7);
  EXPECT_EQ(t.texts, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(t.lengths, (std::vector<int64_t>{7}));
  t = parse_infill_template("no placeholder <|mdm_mask|> <|masks|>", 16);
  EXPECT_EQ(t.texts, (std::vector<std::string>{"no placeholder <|mdm_mask|> <|masks|>"}));
  EXPECT_TRUE(t.lengths.empty());
  EXPECT_EQ(parse_infill_template("x").lengths, (std::vector<int64_t>{}));
  EXPECT_EQ(parse_infill_template("<|mask|>").lengths[0], kDefaultInfillLength);
  for (const char* bad :
       {"<|mask:|>", "<|mask:0|>", "<|mask:x|>", "<|mask:3", "<|mask:-2|>", "<|mask:9999999|>"})
    EXPECT_THROW(parse_infill_template(bad), std::exception) << bad;
}

TEST(InfillTemplate, CanvasHasMaskRunsBetweenSeparatelyEncodedPieces) {
  const Tokenizer tok = Tokenizer::load(kDemo);
  const auto c =
      build_infill_canvas(tok, parse_infill_template("def f(<|mask:3|>):\n<|mask:2|>"), 4092, {4091});
  auto expect = std::vector<int32_t>{4091};
  for (int32_t id : tok.encode("def f(", false)) expect.push_back(id);
  expect.insert(expect.end(), 3, 4092);
  for (int32_t id : tok.encode("):\n", false)) expect.push_back(id);
  expect.insert(expect.end(), 2, 4092);
  EXPECT_EQ(c.ids, expect);
  ASSERT_EQ(c.span_begin.size(), 2u);
  EXPECT_EQ(c.span_begin[0], 1 + static_cast<int64_t>(tok.encode("def f(", false).size()));
  EXPECT_EQ(c.span_length, (std::vector<int64_t>{3, 2}));
}

// Each committed position comes with the score it was chosen on (for --unmask confidence: the probability of
// the committed token), which `dllm rewrite --refine` ranks positions by.
TEST(Infill, StepEventsCarryTheCommittedScores) {
  const auto k = test::read_cases(test::data_path("infill/demo_infill.json"))[0];
  const auto canvas = k["canvas"].get<std::vector<int32_t>>();
  int64_t seen = 0;
  GenerateParams p;
  auto r = infill(*demo(), {canvas}, p, [&](const StepEvent& ev) {
    EXPECT_NE(ev.committed_scores, nullptr);
    if (ev.committed_scores == nullptr) return false;
    EXPECT_EQ((*ev.committed_scores)[0].size(), (*ev.committed)[0].size());
    for (double s : (*ev.committed_scores)[0]) {
      EXPECT_GT(s, 0.0);
      EXPECT_LE(s, 1.0);
      ++seen;
    }
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(seen, static_cast<int64_t>(std::count(canvas.begin(), canvas.end(), demo()->info().mask_id)));
}

}  // namespace
}  // namespace dllm
