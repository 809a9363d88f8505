// Chat templates rendered by the Jinja subset must equal Python Jinja2's output. expected.jsonl is made by
// tests/data/tokenizers/chat/gen_expected.py (Python Jinja2 3.1 with transformers' apply_chat_template
// settings: sandboxed environment, trim_blocks, lstrip_blocks, loopcontrols, tojson, raise_exception); rerun
// it after editing cases.json. Python is not needed to run the tests.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "test_util.h"

namespace dllm {
namespace {

using ojson = nlohmann::ordered_json;

std::string chat_dir() {
  return test::tokenizer_dir("chat");
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ChatTemplate load_named(const std::string& name) {
  static const std::map<std::string, nlohmann::json> special = {
      {"llada", {{"bos_token", "<|startoftext|>"}, {"eos_token", "<|endoftext|>"}}},
      {"qwen2_5", {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}}},
      {"mistral", {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}}},
      {"mistral_system", {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}}},
      {"features", {{"bos_token", "<B>"}, {"eos_token", "<E>"}}},
      {"features2", {{"bos_token", "<B>"}, {"eos_token", "<E>"}}},
  };
  // Templates kept in a tokenizer_config.json load the way `dllm --chat` loads a model directory.
  if (name == "qwen3") return ChatTemplate::load(test::tokenizer_dir("qwen3"));
  if (name == "llada2" || name == "sdar") return ChatTemplate::load(chat_dir() + "/" + name);
  return ChatTemplate::from_string(read(chat_dir() + "/" + name + ".jinja"), special.at(name), name);
}

TEST(ChatTemplate, MatchesJinja2) {
  std::ifstream in(chat_dir() + "/cases.json");
  ojson cases = ojson::parse(in);
  std::map<std::string, nlohmann::json> expected;
  for (const auto& e : test::read_jsonl(chat_dir() + "/expected.jsonl")) expected[e["name"]] = e;
  ASSERT_EQ(cases.size(), expected.size());
  int rendered = 0, rejected = 0;
  std::map<std::string, int> per_template;
  for (const auto& c : cases) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    ++per_template[c["template"].get<std::string>()];
    ChatTemplate t = load_named(c["template"]);
    ojson extra = c.contains("extra") ? c["extra"] : ojson::object();
    const auto& want = expected.at(name);
    if (want.contains("error")) {
      try {
        t.render(c["messages"], c.value("add_generation_prompt", false), extra);
        ADD_FAILURE() << "expected an error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(want["error"].get<std::string>()), std::string::npos)
            << e.what();
      }
      ++rejected;
      continue;
    }
    EXPECT_EQ(t.render(c["messages"], c.value("add_generation_prompt", false), extra),
              want["expected"].get<std::string>());
    ++rendered;
  }
  EXPECT_EQ(rendered, 45);
  EXPECT_EQ(rejected, 2);
  // The block-diffusion families' real templates (README.md there says where they come from).
  EXPECT_EQ(per_template["llada2"], 14);
  EXPECT_EQ(per_template["sdar"], 14);
}

TEST(ChatTemplate, PlainJsonMessages) {
  ChatTemplate t = load_named("llada");
  nlohmann::json msgs = nlohmann::json::array({{{"role", "user"}, {"content", " hi "}}});
  EXPECT_EQ(t.render(msgs, true),
            "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, LoadFromModelDirAndConfigFile) {
  ChatTemplate a = ChatTemplate::load(test::tokenizer_dir("qwen3"));
  ChatTemplate b = ChatTemplate::load(test::tokenizer_dir("qwen3") + "/tokenizer_config.json");
  EXPECT_EQ(a.source(), b.source());
  nlohmann::json msgs = nlohmann::json::array({{{"role", "user"}, {"content", "Hello"}}});
  EXPECT_EQ(a.render(msgs, true), "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, MissingTemplateIsAnError) {
  try {
    ChatTemplate::load(test::tokenizer_dir("mistral7b"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no chat_template"), std::string::npos) << e.what();
  }
}

void expect_error(const std::string& source, const std::string& needle,
                  const nlohmann::json& msgs = nlohmann::json::array()) {
  try {
    ChatTemplate t = ChatTemplate::from_string(source);
    t.render(msgs, false);
    ADD_FAILURE() << "expected an error for: " << source;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << source << " -> " << e.what();
  }
}

TEST(ChatTemplate, UnsupportedConstructsAreNamed) {
  expect_error("{% include 'other.jinja' %}", "unsupported statement '{% include %}'");
  expect_error("{% extends 'base' %}", "unsupported statement '{% extends %}'");
  expect_error("{% filter upper %}x{% endfilter %}", "unsupported statement '{% filter %}'");
  expect_error("{{ 'x' | wordwrap(3) }}", "unsupported filter 'wordwrap'");
  expect_error("{{ 3 is prime }}", "unsupported test 'prime'");
  expect_error("{{ cycler(1, 2) }}", "unsupported function 'cycler()'");
  expect_error("{{ 'a{}'.format(1) }}", "unsupported string method 'format'");
  expect_error("{{ 'x'.zfill(3) }}", "unsupported method or undefined function 'zfill'");
  expect_error("{% for x in y recursive %}{% endfor %}", "recursive");
}

TEST(ChatTemplate, SyntaxErrorsHaveLineNumbers) {
  expect_error("line1\n{% if x %}\nno end", "line 2: missing '{% endif %}'");
  expect_error("a\nb\n{{ 'unterminated }}", "line 3");
  expect_error("{{ x + }}", "unexpected end of expression");
  expect_error("{% endfor %}", "unexpected '{% endfor %}'");
  expect_error("{{ foo.bar }}", "'foo' is undefined");
  expect_error("{{ raise_exception('custom failure') }}", "custom failure");
}

// JSON integers up to INT64_MAX print exactly, as Python's; a larger one (nlohmann's unsigned) is an error,
// not a wrapped negative number.
TEST(ChatTemplate, LargeIntegers) {
  ChatTemplate t = ChatTemplate::from_string("{{ n }} {{ {'n': n} | tojson }}");
  EXPECT_EQ(t.render(nlohmann::json::array(), false, {{"n", INT64_MAX}}),
            "9223372036854775807 {\"n\": 9223372036854775807}");
  EXPECT_EQ(t.render(nlohmann::json::array(), false, {{"n", INT64_MIN}}),
            "-9223372036854775808 {\"n\": -9223372036854775808}");
  try {
    t.render(nlohmann::json::array(), false, nlohmann::json::parse(R"({"n": 12345678901234567890})"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("integer 12345678901234567890 is beyond"), std::string::npos)
        << e.what();
  }
}

// Integer arithmetic is Python's up to 64 bits, and an overflow is an error (found by the fuzzer: `7**77777`
// was undefined behaviour). Work and size are bounded, so an outside template cannot exhaust memory or hang a
// worker.
TEST(ChatTemplate, ArithmeticOverflowAndRunawayTemplatesAreErrors) {
  auto render = [](const std::string& src) {
    return ChatTemplate::from_string(src).render(nlohmann::json::array(), false);
  };
  EXPECT_EQ(render("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 3 ** 0 }} {{ 2 ** -1 }}"),
            "4611686018427387904 -9223372036854775808 1 0.5");
  EXPECT_EQ(render("{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -1 }} {{ (-9223372036854775807 - 1) % -1 }}"),
            "-4 2 0 0");
  EXPECT_EQ(render("{{ range(3) | list }} {{ range(10, 0, -4) | list }} {{ [1,2,3,4,5][1:5:3] }}"),
            "[0, 1, 2] [10, 6, 2] [2, 5]");
  EXPECT_EQ(render("{{ [1,2,3][0:3:9223372036854775807] }} {{ [1,2,3][2::-9223372036854775807] }}"),
            "[1] [3]");
  expect_error("{{ 7 ** 77777 }}", "integer overflow in '**'");
  expect_error("{{ 9223372036854775807 + 1 }}", "integer overflow in '+'");
  expect_error("{{ (-9223372036854775807 - 1) - 1 }}", "integer overflow in '-'");
  expect_error("{{ 4294967296 * 4294967296 }}", "integer overflow in '*'");
  expect_error("{{ (-9223372036854775807 - 1) // -1 }}", "integer overflow in '//'");
  expect_error("{{ -(-9223372036854775807 - 1) }}", "integer overflow in '-'");
  expect_error("{{ (-9223372036854775807 - 1) | abs }}", "integer overflow in 'abs'");
  expect_error("{{ (1e300 * 1e300) | int }}", "cannot convert float inf to an integer");
  expect_error("{{ range(9223372036854775807) | length }}", "range() of 9223372036854775807 items");
  expect_error("{{ 'x' * 9223372036854775807 }}", "over 16 MiB");
  expect_error("{{ 'abc' | indent(100000000000) }}", "over 16 MiB");
  expect_error("{% for i in range(1000000) %}{{ 'x' * 100 }}{% endfor %}", "over 16 MiB");
  expect_error("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}", "nests deeper than 256 levels");
  expect_error("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}",
               "nests deeper than 256 levels");
  std::string chain = "{{ 1";
  for (int i = 0; i < 300; ++i) chain += " + 1";
  expect_error(chain + " }}", "nests deeper than 256 levels");
  std::string nested_ifs;
  for (int i = 0; i < 300; ++i) nested_ifs += "{% if true %}";
  expect_error(nested_ifs, "nests deeper than 256 levels");
  expect_error("{% for i in range(3000) %}{% for j in range(3000) %}{% endfor %}{% endfor %}",
               "more than 4194304 steps");
}

TEST(ChatTemplate, WhitespaceControl) {
  auto render = [](const std::string& src) {
    return ChatTemplate::from_string(src).render(nlohmann::json::array(), false);
  };
  EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");  // trim_blocks + lstrip_blocks
  EXPECT_EQ(render("a   {{- 'b' -}}   c"), "abc");
  EXPECT_EQ(render("x {# comment #} y"), "x  y");
  EXPECT_EQ(render("{% raw %}{{ not evaluated }}{% endraw %}"), "{{ not evaluated }}");
  EXPECT_EQ(render("  {%+ if true %}k{% endif %}"), "  k");
}

}  // namespace
}  // namespace dllm
