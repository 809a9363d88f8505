// Lexer and parser of the Jinja subset: template text -> chunks (text, {{ }}, {% %}) with whitespace control,
// trim_blocks and lstrip_blocks, then a recursive-descent parser for statements and expressions.
#include <cctype>

#include "core/error.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/utf8.h"

namespace dllm::jinja {

namespace {

struct Chunk {
  enum Kind { Text, Expr, Stmt } kind;
  std::string text;
  int line;
};

// Splits the source into chunks, applying '-' whitespace control, trim_blocks and lstrip_blocks.
std::vector<Chunk> lex_chunks(const std::string& src, const std::string& name) {
  struct Raw {
    Chunk::Kind kind;  // Text, Expr, Stmt; comments are kept as Stmt with empty text and dropped later
    std::string text;
    int line;
    bool strip_left = false, strip_right = false, no_lstrip = false, comment = false;
  };
  std::vector<Raw> raws;
  size_t i = 0;
  int line = 1;
  auto count_lines = [&](size_t from, size_t to) {
    for (size_t k = from; k < to; ++k) line += src[k] == '\n';
  };
  while (i < src.size()) {
    size_t open = src.find('{', i);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' &&
           src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open == std::string::npos || open + 1 >= src.size()) {
      raws.push_back({Chunk::Text, src.substr(i), line});
      count_lines(i, src.size());
      break;
    }
    if (open > i) raws.push_back({Chunk::Text, src.substr(i, open - i), line});
    count_lines(i, open);
    char t = src[open + 1];
    std::string close = t == '{' ? "}}" : t == '%' ? "%}" : "#}";
    size_t body = open + 2;
    Raw r{t == '{' ? Chunk::Expr : Chunk::Stmt, "", line};
    r.comment = t == '#';
    if (body < src.size() && src[body] == '-') {
      r.strip_left = true;
      ++body;
    } else if (body < src.size() && src[body] == '+') {
      r.no_lstrip = true;
      ++body;
    }
    // Find the closing delimiter, skipping string literals inside expressions.
    size_t k = body;
    char quote = 0;
    int depth = 0;  // braces of dict literals inside {{ }}
    while (k < src.size()) {
      char c = src[k];
      if (!r.comment && quote) {
        if (c == '\\')
          ++k;
        else if (c == quote)
          quote = 0;
      } else if (!r.comment && (c == '\'' || c == '"')) {
        quote = c;
      } else if (depth == 0 && src.compare(k, 2, close) == 0) {
        break;
      } else if (!r.comment && c == '{') {
        ++depth;
      } else if (!r.comment && c == '}' && depth > 0) {
        --depth;
      }
      ++k;
    }
    if (k >= src.size()) fail(name, ": line ", line, ": unclosed '{", t, "'");
    size_t end = k;
    if (end > body && src[end - 1] == '-') {
      r.strip_right = true;
      --end;
    } else if (end > body && src[end - 1] == '+') {
      --end;
    }
    r.text = src.substr(body, end - body);
    raws.push_back(r);
    count_lines(open, k + 2);
    i = k + 2;
    // {% raw %} ... {% endraw %}: verbatim text.
    if (r.kind == Chunk::Stmt && !r.comment) {
      std::string s = r.text;
      s.erase(0, s.find_first_not_of(" \t\r\n"));
      s.erase(s.find_last_not_of(" \t\r\n") + 1);
      if (s == "raw") {
        size_t e = src.find("endraw", i);
        size_t tag = e == std::string::npos ? e : src.rfind("{%", e);
        if (tag == std::string::npos) fail(name, ": line ", line, ": unclosed {% raw %}");
        raws.back().comment = true;  // the raw tag itself produces nothing
        raws.push_back({Chunk::Text, src.substr(i, tag - i), line});
        count_lines(i, tag);
        size_t close_end = src.find("%}", e);
        if (close_end == std::string::npos) fail(name, ": line ", line, ": unclosed {% endraw %}");
        i = close_end + 2;
      }
    }
  }
  // Whitespace control on the text chunks.
  for (size_t k = 0; k < raws.size(); ++k) {
    Raw& r = raws[k];
    if (r.kind != Chunk::Text) continue;
    const Raw* prev = k > 0 ? &raws[k - 1] : nullptr;
    const Raw* next = k + 1 < raws.size() ? &raws[k + 1] : nullptr;
    std::string& t = r.text;
    // Right side (before the next tag): '-' strips all whitespace; lstrip_blocks strips the spaces and tabs
    // between the start of the line and a block tag.
    size_t cut = t.size();
    if (next && next->strip_left) {
      size_t e = t.find_last_not_of(" \t\r\n");
      cut = e == std::string::npos ? 0 : e + 1;
    } else if (next && next->kind == Chunk::Stmt && !next->no_lstrip) {
      size_t e = t.find_last_not_of(" \t");
      if (e == std::string::npos) {
        if (k == 0) cut = 0;
      } else if (t[e] == '\n') {
        cut = e + 1;
      }
    }
    t.erase(cut);
    // Left side (after the previous tag): '-' strips all whitespace; trim_blocks removes one newline.
    if (prev && prev->strip_right) {
      size_t b = t.find_first_not_of(" \t\r\n");
      t.erase(0, b == std::string::npos ? t.size() : b);
    } else if (prev && prev->kind == Chunk::Stmt && !t.empty()) {
      if (t[0] == '\n')
        t.erase(0, 1);
      else if (t.compare(0, 2, "\r\n") == 0)
        t.erase(0, 2);
    }
  }
  std::vector<Chunk> out;
  for (auto& r : raws) {
    if (r.comment) continue;
    if (r.kind == Chunk::Text && r.text.empty()) continue;
    out.push_back({r.kind, std::move(r.text), r.line});
  }
  return out;
}

// ---- expression tokens ----

struct Tok {
  enum Kind { Name, String, Int, Float, Op, End } kind;
  std::string text;
};

std::vector<Tok> lex_expr(const std::string& s, const std::string& name, int line) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Tok::Name, s.substr(i, j - i)});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      std::string num;
      for (size_t k = i; k < j; ++k)
        if (s[k] != '_') num += s[k];
      out.push_back({is_float ? Tok::Float : Tok::Int, num});
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string v;
      size_t j = i + 1;
      while (j < s.size() && s[j] != c) {
        if (s[j] == '\\' && j + 1 < s.size()) {
          char e = s[++j];
          switch (e) {
            case 'n':
              v += '\n';
              break;
            case 't':
              v += '\t';
              break;
            case 'r':
              v += '\r';
              break;
            case '\\':
              v += '\\';
              break;
            case '\'':
              v += '\'';
              break;
            case '"':
              v += '"';
              break;
            case '0':
              v += '\0';
              break;
            case 'u':
            case 'x': {
              size_t digits = e == 'u' ? 4 : 2;
              if (j + digits >= s.size())
                fail(name, ": line ", line, ": bad \\", std::string(1, e), " escape");
              uint32_t cp = 0;
              for (size_t d = 1; d <= digits; ++d) {
                int h = std::isxdigit(static_cast<unsigned char>(s[j + d]))
                            ? std::stoi(std::string(1, s[j + d]), nullptr, 16)
                            : -1;
                if (h < 0) fail(name, ": line ", line, ": bad \\", std::string(1, e), " escape");
                cp = cp * 16 + static_cast<uint32_t>(h);
              }
              j += digits;
              tok::utf8_append(v, cp);
              break;
            }
            default:
              v += '\\';
              v += e;
          }
          ++j;
          continue;
        }
        v += s[j++];
      }
      if (j >= s.size()) fail(name, ": line ", line, ": unterminated string literal");
      out.push_back({Tok::String, v});
      i = j + 1;
      continue;
    }
    static const char* const kOps[] = {"==", "!=", "<=", ">=", "//", "**", "+", "-", "*", "/", "%", "~", "<",
                                       ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}"};
    bool found = false;
    for (const char* op : kOps) {
      size_t n = std::char_traits<char>::length(op);
      if (s.compare(i, n, op) == 0) {
        out.push_back({Tok::Op, op});
        i += n;
        found = true;
        break;
      }
    }
    if (!found) fail(name, ": line ", line, ": unexpected character '", std::string(1, c), "'");
  }
  out.push_back({Tok::End, ""});
  return out;
}

// ---- parser ----

// The parser recurses on nested parentheses, brackets, unary operators and blocks: bounded, so that an
// outside template fails with an error instead of overflowing the stack.
constexpr int kMaxParseDepth = 256;

class Parser {
 public:
  Parser(std::vector<Chunk> chunks, std::string name) : chunks_(std::move(chunks)), name_(std::move(name)) {}

  NodePtr parse() {
    auto root = std::make_shared<Node>(NK::Seq, 1);
    std::string end = parse_block(root->a, {});
    if (!end.empty()) fail_at(line_, "unexpected '{% ", end, " %}'");
    return root;
  }

 private:
  template <class... P>
  [[noreturn]] void fail_at(int line, P&&... parts) const {
    fail(name_, ": line ", line, ": ", std::forward<P>(parts)...);
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxParseDepth)
        parser.fail_at(parser.line_, "the template nests deeper than ", kMaxParseDepth, " levels");
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  // Parses statements into `out` until one of `ends` (returned) or the end of input ("").
  std::string parse_block(std::vector<NodePtr>& out, const std::vector<std::string>& ends) {
    const DepthGuard depth(*this);
    while (pos_ < chunks_.size()) {
      const Chunk& c = chunks_[pos_++];
      line_ = c.line;
      if (c.kind == Chunk::Text) {
        auto n = std::make_shared<Node>(NK::Text, c.line);
        n->s = c.text;
        out.push_back(n);
        continue;
      }
      toks_ = lex_expr(c.text, name_, c.line);
      tp_ = 0;
      if (c.kind == Chunk::Expr) {
        auto n = std::make_shared<Node>(NK::Output, c.line);
        n->a.push_back(expr());
        expect_end();
        out.push_back(n);
        continue;
      }
      if (peek().kind != Tok::Name) fail_at(c.line, "expected a statement name");
      std::string kw = next().text;
      for (const auto& e : ends)
        if (kw == e) return kw;
      out.push_back(statement(kw, c.line));
    }
    if (!ends.empty()) fail_at(line_, "missing '{% ", ends.back(), " %}'");
    return "";
  }

  NodePtr statement(const std::string& kw, int line) {
    if (kw == "if") {
      auto n = std::make_shared<Node>(NK::If, line);
      n->a.push_back(expr());
      expect_end();
      while (true) {
        n->bodies.emplace_back();
        std::string end = parse_block(n->bodies.back(), {"elif", "else", "endif"});
        if (end == "elif") {
          n->a.push_back(expr());
          expect_end();
        } else if (end == "else") {
          expect_end();
          n->bodies.emplace_back();
          parse_block(n->bodies.back(), {"endif"});
          expect_end();
          break;
        } else {
          expect_end();
          break;
        }
      }
      return n;
    }
    if (kw == "for") {
      auto n = std::make_shared<Node>(NK::For, line);
      n->names.push_back(name_tok());
      while (accept(",")) n->names.push_back(name_tok());
      if (!accept_name("in")) fail_at(line, "expected 'in' in for loop");
      n->a.push_back(or_expr());  // no conditional expression here: "if" starts the loop filter
      n->a.push_back(accept_name("if") ? expr() : nullptr);
      if (accept_name("recursive")) fail_at(line, "unsupported: recursive for loops");
      expect_end();
      n->bodies.emplace_back();
      std::string end = parse_block(n->bodies.back(), {"else", "endfor"});
      n->bodies.emplace_back();
      if (end == "else") {
        expect_end();
        parse_block(n->bodies.back(), {"endfor"});
      }
      expect_end();
      return n;
    }
    if (kw == "set") {
      std::string target = name_tok();
      if (accept(".")) {
        auto n = std::make_shared<Node>(NK::SetAttr, line);
        n->names = {target, name_tok()};
        expect("=");
        n->a.push_back(expr());
        expect_end();
        return n;
      }
      std::vector<std::string> names{target};
      while (accept(",")) names.push_back(name_tok());
      if (peek().kind == Tok::End) {
        if (names.size() != 1) fail_at(line, "block set needs one name");
        auto n = std::make_shared<Node>(NK::SetBlock, line);
        n->names = names;
        n->bodies.emplace_back();
        parse_block(n->bodies.back(), {"endset"});
        expect_end();
        return n;
      }
      auto n = std::make_shared<Node>(NK::Set, line);
      n->names = names;
      expect("=");
      n->a.push_back(tuple_or_expr());
      expect_end();
      return n;
    }
    if (kw == "break" || kw == "continue") {
      expect_end();
      return std::make_shared<Node>(kw == "break" ? NK::Break : NK::Continue, line);
    }
    if (kw == "macro") {
      auto n = std::make_shared<Node>(NK::Macro, line);
      n->s = name_tok();
      expect("(");
      while (!accept(")")) {
        n->names.push_back(name_tok());
        if (accept("=")) {
          n->kw.emplace_back(n->names.back(), expr());
        }
        if (!accept(",")) {
          expect(")");
          break;
        }
      }
      expect_end();
      n->bodies.emplace_back();
      parse_block(n->bodies.back(), {"endmacro"});
      if (peek().kind == Tok::Name) next();  // {% endmacro name %}
      expect_end();
      return n;
    }
    if (kw == "generation") {
      expect_end();
      auto n = std::make_shared<Node>(NK::Generation, line);
      n->bodies.emplace_back();
      parse_block(n->bodies.back(), {"endgeneration"});
      expect_end();
      return n;
    }
    if (kw.rfind("end", 0) == 0 || kw == "elif" || kw == "else") fail_at(line, "unexpected '{% ", kw, " %}'");
    fail_at(line, "unsupported statement '{% ", kw, " %}'");
  }

  // ---- expressions ----
  const Tok& peek() const { return toks_[tp_]; }
  Tok next() { return toks_[tp_ < toks_.size() - 1 ? tp_++ : tp_]; }
  bool is_op(const char* op) const { return peek().kind == Tok::Op && peek().text == op; }
  bool is_name(const char* n) const { return peek().kind == Tok::Name && peek().text == n; }
  bool accept(const char* op) {
    if (!is_op(op)) return false;
    ++tp_;
    return true;
  }
  bool accept_name(const char* n) {
    if (!is_name(n)) return false;
    ++tp_;
    return true;
  }
  void expect(const char* op) {
    if (!accept(op)) fail_at(line_, "expected '", op, "', got '", peek().text, "'");
  }
  void expect_end() {
    if (peek().kind != Tok::End) fail_at(line_, "unexpected '", peek().text, "'");
  }
  std::string name_tok() {
    if (peek().kind != Tok::Name) fail_at(line_, "expected a name, got '", peek().text, "'");
    return next().text;
  }
  NodePtr mk(NK k) { return std::make_shared<Node>(k, line_); }

  NodePtr tuple_or_expr() {
    NodePtr first = expr();
    if (!is_op(",")) return first;
    auto l = mk(NK::ListLit);
    l->a.push_back(first);
    while (accept(",")) {
      if (peek().kind == Tok::End) break;
      l->a.push_back(expr());
    }
    return l;
  }

  NodePtr expr() {
    const DepthGuard depth(*this);
    NodePtr e = or_expr();
    if (accept_name("if")) {
      auto n = mk(NK::Cond);
      n->a.push_back(or_expr());  // condition
      n->a.push_back(e);          // then
      n->a.push_back(accept_name("else") ? expr() : nullptr);
      return n;
    }
    return e;
  }
  NodePtr or_expr() {
    NodePtr l = and_expr();
    while (accept_name("or")) {
      auto n = mk(NK::Or);
      n->a = {l, and_expr()};
      l = n;
    }
    return l;
  }
  NodePtr and_expr() {
    NodePtr l = not_expr();
    while (accept_name("and")) {
      auto n = mk(NK::And);
      n->a = {l, not_expr()};
      l = n;
    }
    return l;
  }
  NodePtr not_expr() {
    const DepthGuard depth(*this);
    if (accept_name("not")) {
      auto n = mk(NK::Not);
      n->a.push_back(not_expr());
      return n;
    }
    return compare();
  }
  NodePtr compare() {
    NodePtr l = math1();
    while (true) {
      std::string op;
      if (peek().kind == Tok::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                     peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && tp_ + 1 < toks_.size() && toks_[tp_ + 1].kind == Tok::Name &&
                 toks_[tp_ + 1].text == "in") {
        tp_ += 2;
        op = "not in";
      } else {
        return l;
      }
      auto n = mk(NK::Binary);
      n->s = op;
      n->a = {l, math1()};
      l = n;
    }
  }
  NodePtr binary_chain(NodePtr (Parser::*sub)(), std::initializer_list<const char*> ops) {
    NodePtr l = (this->*sub)();
    while (true) {
      const char* hit = nullptr;
      for (const char* op : ops)
        if (is_op(op)) hit = op;
      if (!hit) return l;
      next();
      auto n = mk(NK::Binary);
      n->s = hit;
      n->a = {l, (this->*sub)()};
      l = n;
    }
  }
  NodePtr math1() { return binary_chain(&Parser::concat, {"+", "-"}); }
  NodePtr concat() { return binary_chain(&Parser::math2, {"~"}); }
  NodePtr math2() { return binary_chain(&Parser::power, {"*", "/", "//", "%"}); }
  NodePtr power() { return binary_chain(&Parser::unary, {"**"}); }
  NodePtr unary() {
    const DepthGuard depth(*this);
    if (accept("-")) {
      auto n = mk(NK::Neg);
      n->a.push_back(unary());
      return n;
    }
    if (accept("+")) return unary();
    return filters(postfix(primary()));
  }

  void call_args(Node& n) {
    // after '(' ; fills n.a (positional, after any existing) and n.kw
    while (!accept(")")) {
      if (peek().kind == Tok::Name && tp_ + 1 < toks_.size() && toks_[tp_ + 1].kind == Tok::Op &&
          toks_[tp_ + 1].text == "=") {
        std::string k = next().text;
        next();
        n.kw.emplace_back(k, expr());
      } else {
        n.a.push_back(expr());
      }
      if (!accept(",")) {
        expect(")");
        break;
      }
    }
  }

  NodePtr postfix(NodePtr e) {
    while (true) {
      if (accept(".")) {
        auto n = mk(NK::Attr);
        if (peek().kind == Tok::Int) {
          n = mk(NK::Item);
          auto lit = mk(NK::Literal);
          lit->value = Value(static_cast<int64_t>(std::stoll(next().text)));
          n->a = {e, lit};
        } else {
          n->s = name_tok();
          n->a = {e};
        }
        e = n;
      } else if (accept("[")) {
        NodePtr parts[3];
        int colons = 0;
        while (!is_op("]")) {
          if (accept(":")) {
            if (++colons > 2) fail_at(line_, "bad slice");
            continue;
          }
          parts[colons] = expr();
        }
        expect("]");
        if (colons == 0) {
          auto n = mk(NK::Item);
          if (!parts[0]) fail_at(line_, "empty subscript");
          n->a = {e, parts[0]};
          e = n;
        } else {
          auto n = mk(NK::Slice);
          n->a = {e, parts[0], parts[1], parts[2]};
          e = n;
        }
      } else if (accept("(")) {
        auto n = mk(NK::Call);
        n->a.push_back(e);
        call_args(*n);
        e = n;
      } else {
        return e;
      }
    }
  }

  NodePtr filters(NodePtr e) {
    while (true) {
      if (accept("|")) {
        auto n = mk(NK::Filter);
        n->s = name_tok();
        n->a.push_back(e);
        if (accept("(")) call_args(*n);
        e = postfix(n);
      } else if (is_name("is")) {
        next();
        auto n = mk(NK::Test);
        n->negate = accept_name("not");
        n->s = name_tok();
        n->a.push_back(e);
        if (accept("(")) {
          call_args(*n);
        } else if (peek().kind == Tok::String || peek().kind == Tok::Int || peek().kind == Tok::Float ||
                   (peek().kind == Tok::Name && !is_name("and") && !is_name("or") && !is_name("else") &&
                    !is_name("if") && !is_name("is") && !is_name("in") && !is_name("not"))) {
          n->a.push_back(primary());  // "is divisibleby 3", "is equalto x"
        }
        e = n;
      } else {
        return e;
      }
    }
  }

  NodePtr primary() {
    Tok t = next();
    switch (t.kind) {
      case Tok::String: {
        auto n = mk(NK::Literal);
        std::string s = t.text;
        while (peek().kind == Tok::String) s += next().text;  // adjacent literals concatenate
        n->value = Value(s);
        return n;
      }
      case Tok::Int: {
        auto n = mk(NK::Literal);
        n->value = Value(static_cast<int64_t>(std::stoll(t.text)));
        return n;
      }
      case Tok::Float: {
        auto n = mk(NK::Literal);
        n->value = Value(std::stod(t.text));
        return n;
      }
      case Tok::Name: {
        auto n = mk(NK::Literal);
        if (t.text == "true" || t.text == "True") {
          n->value = Value(true);
        } else if (t.text == "false" || t.text == "False") {
          n->value = Value(false);
        } else if (t.text == "none" || t.text == "None") {
          n->value = Value(None{});
        } else {
          n = mk(NK::Name);
          n->s = t.text;
        }
        return n;
      }
      case Tok::Op:
        if (t.text == "(") {
          if (accept(")")) {
            auto l = mk(NK::ListLit);  // empty tuple
            l->s = "tuple";
            return l;
          }
          NodePtr e = expr();
          if (is_op(",")) {
            auto l = mk(NK::ListLit);
            l->s = "tuple";
            l->a.push_back(e);
            while (accept(",")) {
              if (is_op(")")) break;
              l->a.push_back(expr());
            }
            e = l;
          }
          expect(")");
          return e;
        }
        if (t.text == "[") {
          auto l = mk(NK::ListLit);
          while (!accept("]")) {
            l->a.push_back(expr());
            if (!accept(",")) {
              expect("]");
              break;
            }
          }
          return l;
        }
        if (t.text == "{") {
          auto d = mk(NK::DictLit);
          while (!accept("}")) {
            d->a.push_back(expr());
            expect(":");
            d->a.push_back(expr());
            if (!accept(",")) {
              expect("}");
              break;
            }
          }
          return d;
        }
        break;
      case Tok::End:
        fail_at(line_, "unexpected end of expression");
    }
    fail_at(line_, "unexpected '", t.text, "'");
  }

  std::vector<Chunk> chunks_;
  std::string name_;
  size_t pos_ = 0;
  int line_ = 1;
  int depth_ = 0;  // DepthGuard
  std::vector<Tok> toks_;
  size_t tp_ = 0;
};

}  // namespace

NodePtr parse_template(const std::string& source, const std::string& name) {
  // Like Jinja2's default keep_trailing_newline=False: one trailing newline of the source is dropped.
  std::string src = source;
  if (src.size() >= 2 && src.compare(src.size() - 2, 2, "\r\n") == 0)
    src.resize(src.size() - 2);
  else if (!src.empty() && src.back() == '\n')
    src.pop_back();
  return Parser(lex_chunks(src, name), name).parse();
}

}  // namespace dllm::jinja
