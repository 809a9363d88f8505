// Syntax tree of the Jinja subset (internal to jinja_parse.cpp / jinja_eval.cpp).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace dllm::jinja {

enum class NK {
  // expressions
  Literal,
  Name,
  ListLit,
  DictLit,
  Attr,
  Item,
  Slice,
  Call,
  Filter,
  Test,
  Not,
  Neg,
  Binary,
  And,
  Or,
  Cond,
  // statements
  Text,
  Output,
  If,
  For,
  Set,
  SetAttr,
  SetBlock,
  Break,
  Continue,
  Macro,
  Generation,
  Seq,
};

struct Node;
using NodePtr = std::shared_ptr<Node>;

struct Node {
  NK kind;
  int line = 0;
  std::string s;           // name, operator, filter/test name, attribute, text
  Value value;             // Literal
  std::vector<NodePtr> a;  // operands / arguments / if-conditions / for: [iter, filter]
  std::vector<std::pair<std::string, NodePtr>> kw;  // keyword arguments; DictLit uses a[] pairs instead
  std::vector<std::vector<NodePtr>> bodies;  // If: one per branch (+ else); For: body, else; Macro: body
  std::vector<std::string> names;            // For / Set targets, Macro parameters
  bool negate = false;                       // Test: "is not"
  Node(NK k, int l) : kind(k), line(l) {}
};

NodePtr parse_template(const std::string& source, const std::string& name);

}  // namespace dllm::jinja
