// Evaluation of the Jinja subset: statements, expressions, filters, tests, methods and globals.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "tokenizer/jinja.h"
#include "tokenizer/jinja_ast.h"

namespace dllm::jinja {

namespace {

enum class Flow { Normal, Break, Continue };

// Limits on what one render may build or spend. A chat template comes with a model file or a request, so it
// is outside input: without them `range(10**9)`, `'x' * 10**12` or nested loops exhaust memory or hang a
// server worker. Real templates use a few thousand steps and a few KiB, far below these.
constexpr size_t kMaxRenderBytes = size_t{16} << 20;  // any one string, the output included
constexpr int64_t kMaxRangeItems = int64_t{1} << 20;
constexpr int kMaxEvalDepth = 256;  // nested expressions, statements and macro calls (a recursive macro)
constexpr int64_t kMaxRenderSteps = int64_t{1} << 22;  // statements, loop iterations and expressions

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right) {
  auto in_set = [&](char c) {
    if (!chars || chars->is_none() || chars->is_undefined()) return is_space(c);
    return chars->as_string().find(c) != std::string::npos;
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && in_set(s[b])) ++b;
  if (right)
    while (e > b && in_set(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string to_upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string to_lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class Evaluator {
 public:
  Evaluator(const std::string& name, const std::map<std::string, Value>& globals) : name_(name) {
    scopes_.emplace_back(globals.begin(), globals.end());
  }

  Flow exec_block(const std::vector<NodePtr>& body, std::string& out) {
    for (const auto& n : body) {
      Flow f = exec(*n, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

 private:
  template <class... P>
  [[noreturn]] void err(const Node& n, P&&... parts) const {
    fail(name_, ": line ", n.line, ": ", std::forward<P>(parts)...);
  }

  void count_step(const Node& n) {
    if (++steps_ > kMaxRenderSteps) err(n, "the template ran more than ", kMaxRenderSteps, " steps; stopped");
  }
  // Bounds the evaluator's recursion, which follows the template's nesting and its macros' calls, so that an
  // outside template fails with an error instead of overflowing the stack.
  struct DepthGuard {
    DepthGuard(Evaluator& e, const Node& n) : ev(e) {
      if (++ev.depth_ > kMaxEvalDepth)
        ev.err(n, "the template nests deeper than ", kMaxEvalDepth, " levels (a recursive macro?)");
    }
    ~DepthGuard() { --ev.depth_; }
    Evaluator& ev;
  };
  void check_size(const Node& n, size_t bytes) const {
    if (bytes > kMaxRenderBytes)
      err(n, "the template built a string over ", kMaxRenderBytes >> 20, " MiB; stopped");
  }
  // Integer arithmetic as Python does it, except that Python's integers do not overflow and ours are 64-bit:
  // an overflow is an error rather than undefined behaviour.
  int64_t checked(const Node& n, bool overflowed, int64_t value, const std::string& op) const {
    if (overflowed) err(n, "integer overflow in '", op, "'");
    return value;
  }
  int64_t int_power(const Node& n, int64_t base, int64_t exp) const {
    int64_t result = 1;
    while (exp > 0) {
      if ((exp & 1) && __builtin_mul_overflow(result, base, &result)) checked(n, true, 0, "**");
      exp >>= 1;
      if (exp > 0 && __builtin_mul_overflow(base, base, &base)) checked(n, true, 0, "**");
    }
    return result;
  }
  int64_t float_to_int(const Node& n, double x) const {
    // 2^63 is exactly representable; every double below it in magnitude converts without overflow.
    if (!std::isfinite(x) || x >= 9223372036854775808.0 || x < -9223372036854775808.0)
      err(n, "cannot convert float ", x, " to an integer");
    return static_cast<int64_t>(x);
  }

  Value lookup(const std::string& k) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(k);
      if (f != it->end()) return f->second;
    }
    return Value::undefined(k);
  }
  void assign(const std::string& k, Value v) { scopes_.back()[k] = std::move(v); }

  Flow exec(const Node& n, std::string& out) {
    count_step(n);
    const DepthGuard depth(*this, n);
    switch (n.kind) {
      case NK::Text:
        out += n.s;
        check_size(n, out.size());
        return Flow::Normal;
      case NK::Output: {
        Value v = eval(*n.a[0]);
        out += v.str();
        check_size(n, out.size());
        return Flow::Normal;
      }
      case NK::If:
        for (size_t i = 0; i < n.a.size(); ++i)
          if (eval(*n.a[i]).truthy()) return exec_block(n.bodies[i], out);
        if (n.bodies.size() > n.a.size()) return exec_block(n.bodies.back(), out);
        return Flow::Normal;
      case NK::For:
        exec_for(n, out);
        return Flow::Normal;
      case NK::Set: {
        Value v = eval(*n.a[0]);
        if (n.names.size() == 1) {
          assign(n.names[0], v);
        } else {
          if (!v.is_list() || v.as_list().size() != n.names.size())
            err(n, "cannot unpack ", v.type_name(), " into ", n.names.size(), " names");
          for (size_t i = 0; i < n.names.size(); ++i) assign(n.names[i], v.as_list()[i]);
        }
        return Flow::Normal;
      }
      case NK::SetAttr: {
        Value target = lookup(n.names[0]);
        if (!target.is_namespace())
          err(n, "cannot set attribute '", n.names[1], "' of ", target.type_name(), " '", n.names[0],
              "' (only namespace() objects)");
        target.as_dict().set(n.names[1], eval(*n.a[0]));
        return Flow::Normal;
      }
      case NK::SetBlock: {
        std::string buf;
        exec_block(n.bodies[0], buf);
        assign(n.names[0], Value(buf));
        return Flow::Normal;
      }
      case NK::Break:
        return Flow::Break;
      case NK::Continue:
        return Flow::Continue;
      case NK::Macro:
        define_macro(n);
        return Flow::Normal;
      case NK::Generation:
        return exec_block(n.bodies[0], out);
      default:
        err(n, "internal error: not a statement");
    }
  }

  void exec_for(const Node& n, std::string& out) {
    Value iter = eval(*n.a[0]);
    List items;
    if (iter.is_list()) {
      items = iter.as_list();
    } else if (iter.is_dict()) {
      for (const auto& [k, v] : iter.as_dict().items) items.push_back(Value(k));
    } else if (iter.is_string()) {
      // iterate code points
      const std::string& s = iter.as_string();
      for (size_t i = 0; i < s.size();) {
        size_t len = 1;
        auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0xF0)
          len = 4;
        else if (c >= 0xE0)
          len = 3;
        else if (c >= 0xC0)
          len = 2;
        items.push_back(Value(s.substr(i, len)));
        i += len;
      }
    } else if (!iter.is_undefined() && !iter.is_none()) {
      err(n, "cannot iterate over ", iter.type_name());
    } else if (iter.is_none()) {
      err(n, "'NoneType' object is not iterable");
    }
    scopes_.emplace_back();
    // Apply the loop filter first: loop.* counts only the items that pass.
    List filtered;
    for (auto& item : items) {
      count_step(n);
      bind_targets(n, item);
      if (!n.a[1] || eval(*n.a[1]).truthy()) filtered.push_back(item);
    }
    size_t len = filtered.size();
    for (size_t i = 0; i < len; ++i) {
      count_step(n);
      scopes_.back().clear();
      bind_targets(n, filtered[i]);
      Dict loop;
      loop.set("index", Value(i + 1));
      loop.set("index0", Value(i));
      loop.set("revindex", Value(len - i));
      loop.set("revindex0", Value(len - i - 1));
      loop.set("first", Value(i == 0));
      loop.set("last", Value(i + 1 == len));
      loop.set("length", Value(len));
      loop.set("previtem", i > 0 ? filtered[i - 1] : Value::undefined("loop.previtem"));
      loop.set("nextitem", i + 1 < len ? filtered[i + 1] : Value::undefined("loop.nextitem"));
      assign("loop", Value(std::move(loop)));
      Flow f = exec_block(n.bodies[0], out);
      if (f == Flow::Break) break;
    }
    scopes_.pop_back();
    if (len == 0 && n.bodies.size() > 1) exec_block(n.bodies[1], out);
  }

  void bind_targets(const Node& n, const Value& item) {
    if (n.names.size() == 1) {
      assign(n.names[0], item);
      return;
    }
    if (!item.is_list() || item.as_list().size() != n.names.size())
      err(n, "cannot unpack ", item.type_name(), " into ", n.names.size(), " loop variables");
    for (size_t k = 0; k < n.names.size(); ++k) assign(n.names[k], item.as_list()[k]);
  }

  void define_macro(const Node& n) {
    const Node* node = &n;
    Function f = [this, node](Args& args) -> Value {
      std::map<std::string, Value> frame;
      for (size_t i = 0; i < node->names.size(); ++i) {
        const Value* v = args.get(i, node->names[i]);
        if (v) {
          frame[node->names[i]] = *v;
        } else {
          Value def = Value::undefined(node->names[i]);
          for (const auto& [k, e] : node->kw)
            if (k == node->names[i]) def = eval(*e);
          frame[node->names[i]] = def;
        }
      }
      scopes_.push_back(std::move(frame));
      std::string buf;
      exec_block(node->bodies[0], buf);
      scopes_.pop_back();
      return Value(buf);
    };
    assign(n.s, Value(std::move(f)));
  }

  // ---- expressions ----
  Value eval(const Node& n) {
    count_step(n);
    const DepthGuard depth(*this, n);
    switch (n.kind) {
      case NK::Literal:
        return n.value;
      case NK::Name:
        return lookup(n.s);
      case NK::ListLit: {
        List l;
        for (const auto& e : n.a) l.push_back(eval(*e));
        return n.s == "tuple" ? Value::tuple(std::move(l)) : Value(std::move(l));
      }
      case NK::DictLit: {
        Dict d;
        for (size_t i = 0; i + 1 < n.a.size(); i += 2) {
          Value k = eval(*n.a[i]);
          if (!k.is_string()) err(n, "dict keys must be strings");
          d.set(k.as_string(), eval(*n.a[i + 1]));
        }
        return Value(std::move(d));
      }
      case NK::Attr:
        return get_attr(n, eval(*n.a[0]), n.s);
      case NK::Item:
        return get_item(n, eval(*n.a[0]), eval(*n.a[1]));
      case NK::Slice:
        return slice(n);
      case NK::Call:
        return call(n);
      case NK::Filter:
        return filter(n);
      case NK::Test: {
        bool r = test(n);
        return Value(n.negate ? !r : r);
      }
      case NK::Not:
        return Value(!eval(*n.a[0]).truthy());
      case NK::Neg: {
        Value v = eval(*n.a[0]);
        if (v.is_int())
          return Value(checked(n, v.as_int() == INT64_MIN, v.as_int() == INT64_MIN ? 0 : -v.as_int(), "-"));
        if (v.is_float()) return Value(-v.as_number());
        err(n, "bad operand type for unary -: ", v.type_name());
      }
      case NK::And: {
        Value l = eval(*n.a[0]);
        return l.truthy() ? eval(*n.a[1]) : l;
      }
      case NK::Or: {
        Value l = eval(*n.a[0]);
        return l.truthy() ? l : eval(*n.a[1]);
      }
      case NK::Cond:
        if (eval(*n.a[0]).truthy()) return eval(*n.a[1]);
        return n.a[2] ? eval(*n.a[2]) : Value::undefined("else branch");
      case NK::Binary:
        return binary(n);
      default:
        err(n, "internal error: not an expression");
    }
  }

  void require_defined(const Node& n, const Value& v) const {
    if (v.is_undefined()) err(n, "'", v.undefined_name(), "' is undefined");
  }

  Value get_attr(const Node& n, const Value& obj, const std::string& name) {
    require_defined(n, obj);
    if (obj.is_dict()) {
      // Like Jinja's getattr: a Python attribute (dict method) wins over a key of the same name.
      if (!obj.is_namespace()) {
        Value m = method(n, obj, name);
        if (!m.is_undefined()) return m;
      }
      if (const Value* v = obj.as_dict().find(name)) return *v;
      return Value::undefined(name);
    }
    Value m = method(n, obj, name);
    if (!m.is_undefined()) return m;
    return Value::undefined(name);
  }

  Value get_item(const Node& n, const Value& obj, const Value& key) {
    require_defined(n, obj);
    if (obj.is_dict()) {
      if (!key.is_string()) return Value::undefined("item");
      if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
      return Value::undefined(key.as_string());
    }
    if (obj.is_list() || obj.is_string()) {
      if (!key.is_int()) {
        if (key.is_string()) return get_attr(n, obj, key.as_string());
        err(n, "indices must be integers, not ", key.type_name());
      }
      int64_t size = obj.is_list() ? static_cast<int64_t>(obj.as_list().size())
                                   : static_cast<int64_t>(obj.as_string().size());
      int64_t i = key.as_int();
      if (i < 0) i += size;
      if (i < 0 || i >= size) return Value::undefined("index " + std::to_string(key.as_int()));
      if (obj.is_list()) return obj.as_list()[static_cast<size_t>(i)];
      return Value(obj.as_string().substr(static_cast<size_t>(i), 1));
    }
    err(n, "'", obj.type_name(), "' object is not subscriptable");
  }

  Value slice(const Node& n) {
    Value obj = eval(*n.a[0]);
    require_defined(n, obj);
    auto opt_int = [&](const NodePtr& e) -> std::optional<int64_t> {
      if (!e) return std::nullopt;
      Value v = eval(*e);
      if (v.is_none()) return std::nullopt;
      if (!v.is_int()) err(n, "slice indices must be integers");
      return v.as_int();
    };
    auto start = opt_int(n.a[1]), stop = opt_int(n.a[2]), step_o = opt_int(n.a[3]);
    int64_t step = step_o.value_or(1);
    if (step == 0) err(n, "slice step cannot be zero");
    int64_t size = obj.is_list()     ? static_cast<int64_t>(obj.as_list().size())
                   : obj.is_string() ? static_cast<int64_t>(obj.as_string().size())
                                     : (err(n, "cannot slice ", obj.type_name()), 0);
    auto norm = [&](std::optional<int64_t> v, int64_t def) {
      if (!v) return def;
      int64_t x = *v < 0 ? *v + size : *v;
      if (step > 0) return std::clamp<int64_t>(x, 0, size);
      return std::clamp<int64_t>(x, -1, size - 1);
    };
    int64_t b = norm(start, step > 0 ? 0 : size - 1), e = norm(stop, step > 0 ? size : -1);
    // b and e lie in [-1, size], so only the step can push the index out of range: stop before adding it.
    std::vector<int64_t> idx;
    for (int64_t i = b; step > 0 ? i < e : i > e;) {
      idx.push_back(i);
      if (step > 0 ? e - i <= step : i - e + step <= 0) break;
      i += step;
    }
    if (obj.is_list()) {
      List l;
      for (int64_t i : idx) l.push_back(obj.as_list()[static_cast<size_t>(i)]);
      return Value(std::move(l));
    }
    std::string s;
    for (int64_t i : idx) s += obj.as_string()[static_cast<size_t>(i)];
    return Value(s);
  }

  Args eval_args(const Node& n, size_t first) {
    Args args;
    for (size_t i = first; i < n.a.size(); ++i) args.pos.push_back(eval(*n.a[i]));
    for (const auto& [k, e] : n.kw) args.kw.emplace_back(k, eval(*e));
    return args;
  }

  Value call(const Node& n) {
    const Node& callee = *n.a[0];
    if (callee.kind == NK::Name) {
      Value f = lookup(callee.s);
      if (f.is_undefined()) {
        Args args = eval_args(n, 1);
        return global_function(n, callee.s, args);
      }
      if (!f.is_function()) err(n, "'", callee.s, "' is not callable");
      Args args = eval_args(n, 1);
      return f.as_function()(args);
    }
    Value f = eval(callee);
    if (f.is_undefined()) {
      std::string what = callee.kind == NK::Attr ? callee.s : f.undefined_name();
      err(n, "unsupported method or undefined function '", what, "'");
    }
    if (!f.is_function()) err(n, "'", f.type_name(), "' object is not callable");
    Args args = eval_args(n, 1);
    return f.as_function()(args);
  }

  Value global_function(const Node& n, const std::string& name, Args& args) {
    if (name == "raise_exception") {
      const Value* m = args.get(0, "message");
      fail(name_, ": raise_exception: ", m ? m->str() : std::string());
    }
    if (name == "namespace" || name == "dict") {
      Dict d;
      if (!args.pos.empty()) {
        if (!args.pos[0].is_dict()) err(n, name, "() takes keyword arguments");
        d = args.pos[0].as_dict();
      }
      for (auto& [k, v] : args.kw) d.set(k, v);
      if (name == "dict") return Value(std::move(d));
      return Value(Namespace{std::make_shared<Dict>(std::move(d))});
    }
    if (name == "range") {
      std::vector<int64_t> p;
      for (const auto& v : args.pos) {
        if (!v.is_int()) err(n, "range() arguments must be integers");
        p.push_back(v.as_int());
      }
      int64_t b = 0, e = 0, s = 1;
      if (p.size() == 1)
        e = p[0];
      else if (p.size() >= 2)
        b = p[0], e = p[1];
      if (p.size() == 3) s = p[2];
      if (p.empty() || p.size() > 3 || s == 0) err(n, "range() takes 1 to 3 arguments, step != 0");
      // The length as Python computes it, in unsigned arithmetic so that no bound overflows.
      const uint64_t span = s > 0 ? (e > b ? static_cast<uint64_t>(e) - static_cast<uint64_t>(b) : 0)
                                  : (b > e ? static_cast<uint64_t>(b) - static_cast<uint64_t>(e) : 0);
      const uint64_t step = s > 0 ? static_cast<uint64_t>(s) : 0 - static_cast<uint64_t>(s);
      const uint64_t count = span == 0 ? 0 : (span - 1) / step + 1;
      if (count > static_cast<uint64_t>(kMaxRangeItems))
        err(n, "range() of ", count, " items is over the limit of ", kMaxRangeItems);
      List l;
      for (uint64_t i = 0; i < count; ++i)
        l.push_back(Value(static_cast<int64_t>(static_cast<uint64_t>(b) + i * static_cast<uint64_t>(s))));
      return Value(std::move(l));
    }
    if (name == "strftime_now") {
      const Value* f = args.get(0, "format");
      if (!f || !f->is_string()) err(n, "strftime_now(format) needs a string");
      char buf[256];
      std::time_t t = std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      size_t len = std::strftime(buf, sizeof(buf), f->as_string().c_str(), &tm);
      return Value(std::string(buf, len));
    }
    err(n, "unsupported function '", name, "()'");
  }

  // Methods of strings, dicts and lists: returns a bound function, or undefined when there is none.
  Value method(const Node& n, const Value& obj, const std::string& name) {
    Value self = obj;
    const Node* node = &n;
    auto bind = [&](auto fn) {
      return Value(Function([self, node, fn](Args& a) -> Value { return fn(self, a, *node); }));
    };
    if (obj.is_string()) {
      if (name == "startswith" || name == "endswith") {
        bool start = name == "startswith";
        return bind([this, start](const Value& s, Args& a, const Node& nd) -> Value {
          const Value* p = a.get(0, "prefix");
          if (!p) err(nd, "startswith/endswith need an argument");
          std::vector<std::string> options;
          if (p->is_list()) {
            for (const auto& e : p->as_list()) options.push_back(e.str());
          } else {
            options.push_back(p->str());
          }
          const std::string& str = s.as_string();
          for (const auto& o : options) {
            if (o.size() > str.size()) continue;
            if (start ? str.compare(0, o.size(), o) == 0
                      : str.compare(str.size() - o.size(), o.size(), o) == 0)
              return Value(true);
          }
          return Value(false);
        });
      }
      if (name == "strip" || name == "lstrip" || name == "rstrip") {
        bool l = name != "rstrip", r = name != "lstrip";
        return bind([l, r](const Value& s, Args& a, const Node&) -> Value {
          return Value(strip_chars(s.as_string(), a.get(0, "chars"), l, r));
        });
      }
      if (name == "split" || name == "rsplit") {
        bool rs = name == "rsplit";
        return bind([this, rs](const Value& s, Args& a, const Node& nd) -> Value {
          const Value* sep = a.get(0, "sep");
          const Value* mx = a.get(1, "maxsplit");
          int64_t maxsplit = mx && mx->is_int() ? mx->as_int() : -1;
          const std::string& str = s.as_string();
          List parts;
          if (!sep || sep->is_none()) {
            if (rs && maxsplit >= 0) err(nd, "rsplit() without separator and maxsplit is not supported");
            size_t i = 0;
            int64_t count = 0;
            while (i < str.size()) {
              while (i < str.size() && is_space(str[i])) ++i;
              if (i >= str.size()) break;
              if (maxsplit >= 0 && count == maxsplit) {
                size_t e = str.size();
                while (e > i && is_space(str[e - 1])) --e;
                parts.push_back(Value(str.substr(i, e - i)));
                break;
              }
              size_t j = i;
              while (j < str.size() && !is_space(str[j])) ++j;
              parts.push_back(Value(str.substr(i, j - i)));
              ++count;
              i = j;
            }
            return Value(std::move(parts));
          }
          std::string d = sep->str();
          if (d.empty()) err(nd, "empty separator");
          std::vector<std::string> pieces;
          size_t pos = 0;
          while (true) {
            size_t hit = str.find(d, pos);
            if (hit == std::string::npos) break;
            pieces.push_back(str.substr(pos, hit - pos));
            pos = hit + d.size();
          }
          pieces.push_back(str.substr(pos));
          if (maxsplit >= 0 && static_cast<uint64_t>(pieces.size()) > static_cast<uint64_t>(maxsplit) + 1) {
            std::vector<std::string> merged;
            if (!rs) {
              merged.assign(pieces.begin(), pieces.begin() + maxsplit);
              std::string rest;
              for (size_t k = static_cast<size_t>(maxsplit); k < pieces.size(); ++k)
                rest += (k > static_cast<size_t>(maxsplit) ? d : "") + pieces[k];
              merged.push_back(rest);
            } else {
              size_t keep = pieces.size() - static_cast<size_t>(maxsplit);
              std::string rest;
              for (size_t k = 0; k < keep; ++k) rest += (k ? d : "") + pieces[k];
              merged.push_back(rest);
              merged.insert(merged.end(), pieces.begin() + static_cast<std::ptrdiff_t>(keep), pieces.end());
            }
            pieces = std::move(merged);
          }
          for (auto& p : pieces) parts.push_back(Value(p));
          return Value(std::move(parts));
        });
      }
      if (name == "upper")
        return bind(
            [](const Value& s, Args&, const Node&) -> Value { return Value(to_upper(s.as_string())); });
      if (name == "lower")
        return bind(
            [](const Value& s, Args&, const Node&) -> Value { return Value(to_lower(s.as_string())); });
      if (name == "title" || name == "capitalize") {
        bool title = name == "title";
        return bind([title](const Value& s, Args&, const Node&) -> Value {
          return Value(title_case(s.as_string(), title));
        });
      }
      if (name == "replace") {
        return bind([this](const Value& s, Args& a, const Node& nd) -> Value {
          const Value* from = a.get(0, "old");
          const Value* to = a.get(1, "new");
          if (!from || !to) err(nd, "replace() needs 2 arguments");
          return Value(replace_str(nd, s.as_string(), from->str(), to->str()));
        });
      }
      if (name == "find" || name == "count") {
        bool find = name == "find";
        return bind([this, find](const Value& s, Args& a, const Node& nd) -> Value {
          const Value* sub = a.get(0, "sub");
          if (!sub) err(nd, "missing argument");
          const std::string& str = s.as_string();
          std::string x = sub->str();
          if (find) {
            size_t p = str.find(x);
            return Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(p));
          }
          int64_t c = 0;
          if (x.empty()) return Value(static_cast<int64_t>(str.size() + 1));
          for (size_t p = str.find(x); p != std::string::npos; p = str.find(x, p + x.size())) ++c;
          return Value(c);
        });
      }
      if (name == "splitlines") {
        return bind([](const Value& s, Args&, const Node&) -> Value {
          List l;
          const std::string& str = s.as_string();
          size_t i = 0;
          while (i < str.size()) {
            size_t j = str.find_first_of("\r\n", i);
            if (j == std::string::npos) {
              l.push_back(Value(str.substr(i)));
              break;
            }
            l.push_back(Value(str.substr(i, j - i)));
            i = j + ((str[j] == '\r' && j + 1 < str.size() && str[j + 1] == '\n') ? 2 : 1);
          }
          return Value(std::move(l));
        });
      }
      if (name == "join") {
        return bind([this](const Value& s, Args& a, const Node& nd) -> Value {
          std::string out;
          if (!a.pos.empty() && a.pos[0].is_list()) {
            const List& l = a.pos[0].as_list();
            for (size_t i = 0; i < l.size(); ++i) {
              out += (i ? s.as_string() : "") + l[i].str();
              check_size(nd, out.size());
            }
          }
          return Value(out);
        });
      }
      if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum" ||
          name == "islower" || name == "isupper") {
        std::string which = name;
        return bind([which](const Value& s, Args&, const Node&) -> Value {
          const std::string& str = s.as_string();
          if (str.empty()) return Value(false);
          bool cased = false;
          for (unsigned char c : str) {
            bool ok = which == "isdigit"   ? std::isdigit(c) != 0
                      : which == "isspace" ? is_space(static_cast<char>(c))
                      : which == "isalpha" ? std::isalpha(c) != 0
                      : which == "isalnum" ? std::isalnum(c) != 0
                      : which == "islower" ? !std::isupper(c)
                                           : !std::islower(c);
            if (std::isalpha(c)) cased = true;
            if (!ok) return Value(false);
          }
          if (which == "islower" || which == "isupper") return Value(cased);
          return Value(true);
        });
      }
      if (name == "format") err(n, "unsupported string method 'format'");
      return Value::undefined(name);
    }
    if (obj.is_dict() && !obj.is_namespace()) {
      if (name == "items" || name == "keys" || name == "values") {
        int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
        return bind([which](const Value& d, Args&, const Node&) -> Value {
          List l;
          for (const auto& [k, v] : d.as_dict().items) {
            if (which == 0)
              l.push_back(Value::tuple(List{Value(k), v}));
            else
              l.push_back(which == 1 ? Value(k) : v);
          }
          return Value(std::move(l));
        });
      }
      if (name == "get") {
        return bind([this](const Value& d, Args& a, const Node& nd) -> Value {
          const Value* k = a.get(0, "key");
          if (!k) err(nd, "get() needs a key");
          if (k->is_string())
            if (const Value* v = d.as_dict().find(k->as_string())) return *v;
          const Value* def = a.get(1, "default");
          return def ? *def : Value(None{});
        });
      }
      return Value::undefined(name);
    }
    if (obj.is_list()) {
      if (name == "append") {
        return bind([](const Value& l, Args& a, const Node&) -> Value {
          for (auto& v : a.pos) l.as_list().push_back(v);
          return Value(None{});
        });
      }
      if (name == "index") {
        return bind([this](const Value& l, Args& a, const Node& nd) -> Value {
          if (a.pos.empty()) err(nd, "index() needs an argument");
          const List& lst = l.as_list();
          for (size_t i = 0; i < lst.size(); ++i)
            if (values_equal(lst[i], a.pos[0])) return Value(i);
          err(nd, "value is not in list");
        });
      }
      return Value::undefined(name);
    }
    return Value::undefined(name);
  }

  static std::string title_case(const std::string& s, bool every_word) {
    std::string out = s;
    bool start = true;
    for (auto& c : out) {
      auto u = static_cast<unsigned char>(c);
      if (std::isalpha(u)) {
        c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
        start = false;
      } else if (every_word) {
        start = true;
      }
    }
    return out;
  }

  std::string replace_str(const Node& n, const std::string& s, const std::string& from,
                          const std::string& to) const {
    if (from.empty()) return s;
    std::string out;
    size_t pos = 0;
    for (size_t hit = s.find(from); hit != std::string::npos; hit = s.find(from, pos)) {
      out.append(s, pos, hit - pos);
      out += to;
      check_size(n, out.size());
      pos = hit + from.size();
    }
    out.append(s, pos, std::string::npos);
    return out;
  }

  Value filter(const Node& n) {
    const std::string& f = n.s;
    Value v = eval(*n.a[0]);
    Args args = eval_args(n, 1);
    auto arg = [&](size_t i, const char* name) { return args.get(i, name); };
    if (f == "trim") {
      require_defined(n, v);
      return Value(strip_chars(v.str(), arg(0, "chars"), true, true));
    }
    if (f == "length" || f == "count") {
      if (v.is_string()) {
        int64_t c = 0;
        for (unsigned char ch : v.as_string()) c += (ch & 0xC0) != 0x80;
        return Value(c);
      }
      if (v.is_list()) return Value(v.as_list().size());
      if (v.is_dict()) return Value(v.as_dict().items.size());
      if (v.is_undefined()) return Value(int64_t{0});
      err(n, "object of type '", v.type_name(), "' has no length");
    }
    if (f == "upper") return Value(to_upper(v.str()));
    if (f == "lower") return Value(to_lower(v.str()));
    if (f == "title") return Value(title_case(v.str(), true));
    if (f == "capitalize") {
      std::string s = to_lower(v.str());
      if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
      return Value(s);
    }
    if (f == "string") return Value(v.str());
    if (f == "safe" || f == "e" || f == "escape") {
      if (f != "safe") err(n, "unsupported filter '", f, "' (no autoescaping in chat templates)");
      return v;
    }
    if (f == "default" || f == "d") {
      const Value* def = arg(0, "default_value");
      const Value* boolean = arg(1, "boolean");
      bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
      return use_default ? (def ? *def : Value("")) : v;
    }
    if (f == "tojson") {
      const Value* indent = arg(0, "indent");
      const int64_t ind64 = indent && indent->is_int() ? indent->as_int() : -1;
      if (ind64 > 1024) err(n, "tojson indent ", ind64, " is over 1024");
      const int ind = static_cast<int>(std::max<int64_t>(ind64, -1));
      const Value* sk = args.get(99, "sort_keys");
      return Value(v.to_json(ind, sk && sk->truthy()));
    }
    if (f == "first" || f == "last") {
      if (v.is_list()) {
        if (v.as_list().empty()) return Value::undefined(f);
        return f == "first" ? v.as_list().front() : v.as_list().back();
      }
      if (v.is_string()) {
        if (v.as_string().empty()) return Value::undefined(f);
        return Value(std::string(1, f == "first" ? v.as_string().front() : v.as_string().back()));
      }
      err(n, "filter '", f, "' needs a list or string, got ", v.type_name());
    }
    if (f == "join") {
      const Value* sep = arg(0, "d");
      const Value* attr = arg(1, "attribute");
      std::string d = sep ? sep->str() : "";
      std::string out;
      if (!v.is_list()) err(n, "join needs a list, got ", v.type_name());
      const List& l = v.as_list();
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += d;
        out += attr ? get_attr(n, l[i], attr->str()).str() : l[i].str();
        check_size(n, out.size());
      }
      return Value(out);
    }
    if (f == "list") {
      if (v.is_list()) return Value(v.as_list());  // a tuple becomes a list
      if (v.is_dict()) {
        List l;
        for (const auto& [k, x] : v.as_dict().items) l.push_back(Value(k));
        return Value(std::move(l));
      }
      if (v.is_string()) {
        List l;
        for (char c : v.as_string()) l.push_back(Value(std::string(1, c)));
        return Value(std::move(l));
      }
      err(n, "cannot convert ", v.type_name(), " to a list");
    }
    if (f == "reverse") {
      if (v.is_list()) {
        List l = v.as_list();
        std::reverse(l.begin(), l.end());
        return Value(std::move(l));
      }
      if (v.is_string()) {
        std::string s = v.as_string();
        std::reverse(s.begin(), s.end());
        return Value(s);
      }
      err(n, "cannot reverse ", v.type_name());
    }
    if (f == "items") {
      if (!v.is_dict()) err(n, "items needs a dict");
      List l;
      for (const auto& [k, x] : v.as_dict().items) l.push_back(Value::tuple(List{Value(k), x}));
      return Value(std::move(l));
    }
    if (f == "int") {
      if (v.is_int()) return v;
      if (v.is_float()) return Value(float_to_int(n, v.as_number()));
      if (v.is_bool()) return Value(static_cast<int64_t>(v.as_bool()));
      if (v.is_string()) {
        try {
          return Value(static_cast<int64_t>(std::stoll(v.as_string())));
        } catch (...) {
          return Value(int64_t{0});
        }
      }
      return Value(int64_t{0});
    }
    if (f == "float") {
      if (v.is_number() || v.is_bool()) return Value(v.as_number());
      if (v.is_string()) {
        try {
          return Value(std::stod(v.as_string()));
        } catch (...) {
          return Value(0.0);
        }
      }
      return Value(0.0);
    }
    if (f == "abs") {
      if (v.is_int()) {
        checked(n, v.as_int() == INT64_MIN, 0, "abs");
        return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
      }
      if (v.is_float()) return Value(std::fabs(v.as_number()));
      err(n, "abs needs a number");
    }
    if (f == "round") {
      const Value* prec = arg(0, "precision");
      double p = std::pow(10.0, prec && prec->is_int() ? static_cast<double>(prec->as_int()) : 0.0);
      return Value(std::round(v.as_number() * p) / p);
    }
    if (f == "replace") {
      const Value* a = arg(0, "old");
      const Value* b = arg(1, "new");
      if (!a || !b) err(n, "replace needs 2 arguments");
      return Value(replace_str(n, v.str(), a->str(), b->str()));
    }
    if (f == "indent") {
      const Value* w = arg(0, "width");
      const Value* first = arg(1, "first");
      const int64_t width = w && w->is_int() ? std::max<int64_t>(w->as_int(), 0) : 4;
      check_size(n, static_cast<uint64_t>(width));
      std::string pad(static_cast<size_t>(width), ' ');
      if (w && w->is_string()) pad = w->as_string();
      std::string s = v.str(), out;
      bool at_line_start = first && first->truthy();
      for (size_t i = 0; i < s.size(); ++i) {
        if (at_line_start && s[i] != '\n') out += pad;
        at_line_start = false;
        out += s[i];
        check_size(n, out.size());
        if (s[i] == '\n') at_line_start = true;
      }
      return Value(out);
    }
    if (f == "unique") {
      if (!v.is_list()) err(n, "unique needs a list");
      List out;
      for (const auto& x : v.as_list()) {
        bool seen = false;
        for (const auto& y : out) seen = seen || values_equal(x, y);
        if (!seen) out.push_back(x);
      }
      return Value(std::move(out));
    }
    if (f == "map" || f == "selectattr" || f == "rejectattr" || f == "select" || f == "reject") {
      if (v.is_undefined()) return Value(List{});
      if (!v.is_list()) err(n, "filter '", f, "' needs a list, got ", v.type_name());
      List out;
      if (f == "map") {
        const Value* attr = args.get(99, "attribute");
        if (attr) {
          for (const auto& x : v.as_list()) out.push_back(get_attr(n, x, attr->str()));
          return Value(std::move(out));
        }
        if (args.pos.empty()) err(n, "map needs a filter name or attribute=");
        std::string fname = args.pos[0].str();
        for (const auto& x : v.as_list()) {
          Node fake(NK::Filter, n.line);
          fake.s = fname;
          auto lit = std::make_shared<Node>(NK::Literal, n.line);
          lit->value = x;
          fake.a.push_back(lit);
          for (size_t k = 1; k < args.pos.size(); ++k) {
            auto la = std::make_shared<Node>(NK::Literal, n.line);
            la->value = args.pos[k];
            fake.a.push_back(la);
          }
          out.push_back(filter(fake));
        }
        return Value(std::move(out));
      }
      bool by_attr = f == "selectattr" || f == "rejectattr";
      bool keep_if = f == "select" || f == "selectattr";
      size_t ti = by_attr ? 1 : 0;
      for (const auto& x : v.as_list()) {
        Value subject = x;
        if (by_attr) {
          if (args.pos.empty()) err(n, f, " needs an attribute name");
          subject = x.is_dict() ? get_attr(n, x, args.pos[0].str()) : Value::undefined(args.pos[0].str());
        }
        bool r;
        if (args.pos.size() <= ti) {
          r = subject.truthy();
        } else {
          Node fake(NK::Test, n.line);
          fake.s = args.pos[ti].str();
          auto lit = std::make_shared<Node>(NK::Literal, n.line);
          lit->value = subject;
          fake.a.push_back(lit);
          for (size_t k = ti + 1; k < args.pos.size(); ++k) {
            auto la = std::make_shared<Node>(NK::Literal, n.line);
            la->value = args.pos[k];
            fake.a.push_back(la);
          }
          r = test(fake);
        }
        if (r == keep_if) out.push_back(x);
      }
      return Value(std::move(out));
    }
    if (f == "dictsort" || f == "sort") {
      List l;
      if (f == "dictsort") {
        if (!v.is_dict()) err(n, "dictsort needs a dict");
        for (const auto& [k, x] : v.as_dict().items) l.push_back(Value::tuple(List{Value(k), x}));
        std::stable_sort(l.begin(), l.end(), [](const Value& a, const Value& b) {
          return a.as_list()[0].as_string() < b.as_list()[0].as_string();
        });
        return Value(std::move(l));
      }
      if (!v.is_list()) err(n, "sort needs a list");
      l = v.as_list();
      const Value* attr = args.get(99, "attribute");
      const Value* rev = args.get(0, "reverse");
      auto key = [&](const Value& x) { return attr ? get_attr(n, x, attr->str()) : x; };
      std::stable_sort(l.begin(), l.end(),
                       [&](const Value& a, const Value& b) { return less(n, key(a), key(b)); });
      if (rev && rev->truthy()) std::reverse(l.begin(), l.end());
      return Value(std::move(l));
    }
    if (f == "wordcount") {
      int64_t c = 0;
      bool in = false;
      for (char ch : v.str()) {
        bool w = !is_space(ch);
        if (w && !in) ++c;
        in = w;
      }
      return Value(c);
    }
    err(n, "unsupported filter '", f, "'");
  }

  bool test(const Node& n) {
    const std::string& t = n.s;
    Value v = eval(*n.a[0]);
    auto arg = [&](size_t i) -> Value {
      if (n.a.size() <= i + 1) err(n, "test '", t, "' needs an argument");
      return eval(*n.a[i + 1]);
    };
    if (t == "defined") return !v.is_undefined();
    if (t == "undefined") return v.is_undefined();
    if (t == "none") return v.is_none();
    if (t == "string") return v.is_string();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_int();
    if (t == "float") return v.is_float();
    if (t == "boolean") return v.is_bool();
    if (t == "true") return v.is_bool() && v.as_bool();
    if (t == "false") return v.is_bool() && !v.as_bool();
    if (t == "mapping") return v.is_dict();
    if (t == "sequence") return v.is_list() || v.is_string() || v.is_dict();
    if (t == "iterable") return v.is_list() || v.is_string() || v.is_dict();
    if (t == "callable") return v.is_function();
    if (t == "lower") return v.is_string() && to_lower(v.as_string()) == v.as_string();
    if (t == "upper") return v.is_string() && to_upper(v.as_string()) == v.as_string();
    if (t == "even" || t == "odd") {
      if (!v.is_int()) err(n, "test '", t, "' needs an integer");
      return (v.as_int() % 2 == 0) == (t == "even");
    }
    if (t == "divisibleby") {
      Value d = arg(0);
      if (!v.is_int() || !d.is_int() || d.as_int() == 0) err(n, "divisibleby needs non-zero integers");
      return v.as_int() % d.as_int() == 0;
    }
    if (t == "eq" || t == "equalto" || t == "==") return values_equal(v, arg(0));
    if (t == "ne" || t == "!=") return !values_equal(v, arg(0));
    if (t == "in") return contains(n, arg(0), v);
    if (t == "gt" || t == "greaterthan") return less(n, arg(0), v);
    if (t == "lt" || t == "lessthan") return less(n, v, arg(0));
    if (t == "ge") return !less(n, v, arg(0));
    if (t == "le") return !less(n, arg(0), v);
    err(n, "unsupported test '", t, "'");
  }

  bool less(const Node& n, const Value& a, const Value& b) {
    if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool()))
      return a.as_number() < b.as_number();
    if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
    if (a.is_list() && b.is_list()) {
      const List &x = a.as_list(), &y = b.as_list();
      for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
        if (less(n, x[i], y[i])) return true;
        if (less(n, y[i], x[i])) return false;
      }
      return x.size() < y.size();
    }
    err(n, "'<' not supported between ", a.type_name(), " and ", b.type_name());
  }

  bool contains(const Node& n, const Value& container, const Value& item) {
    if (container.is_string()) {
      if (!item.is_string()) err(n, "'in <string>' requires string as left operand, not ", item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    }
    if (container.is_list()) {
      for (const auto& x : container.as_list())
        if (values_equal(x, item)) return true;
      return false;
    }
    if (container.is_dict()) return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    if (container.is_undefined()) err(n, "'", container.undefined_name(), "' is undefined");
    err(n, "argument of type '", container.type_name(), "' is not iterable");
  }

  Value binary(const Node& n) {
    const std::string& op = n.s;
    Value l = eval(*n.a[0]);
    Value r = eval(*n.a[1]);
    if (op == "==") return Value(values_equal(l, r));
    if (op == "!=") return Value(!values_equal(l, r));
    if (op == "in") return Value(contains(n, r, l));
    if (op == "not in") return Value(!contains(n, r, l));
    if (op == "<") return Value(less(n, l, r));
    if (op == ">") return Value(less(n, r, l));
    if (op == "<=") return Value(!less(n, r, l));
    if (op == ">=") return Value(!less(n, l, r));
    if (op == "~") {
      std::string joined = l.str() + r.str();
      check_size(n, joined.size());
      return Value(std::move(joined));
    }
    require_defined(n, l);
    require_defined(n, r);
    if (op == "+") {
      if (l.is_string() && r.is_string()) {
        check_size(n, l.as_string().size() + r.as_string().size());
        return Value(l.as_string() + r.as_string());
      }
      if (l.is_list() && r.is_list()) {
        List out = l.as_list();
        out.insert(out.end(), r.as_list().begin(), r.as_list().end());
        return Value(std::move(out));
      }
    }
    if (op == "*" && ((l.is_string() && r.is_int()) || (l.is_int() && r.is_string()))) {
      const std::string& s = l.is_string() ? l.as_string() : r.as_string();
      int64_t k = l.is_int() ? l.as_int() : r.as_int();
      if (k > 0 && !s.empty())
        check_size(n, static_cast<uint64_t>(k) > kMaxRenderBytes / s.size()
                          ? kMaxRenderBytes + 1
                          : s.size() * static_cast<size_t>(k));
      std::string out;
      for (int64_t i = 0; i < k && !s.empty(); ++i) out += s;
      return Value(out);
    }
    bool nums = (l.is_number() || l.is_bool()) && (r.is_number() || r.is_bool());
    if (!nums) err(n, "unsupported operand types for ", op, ": ", l.type_name(), " and ", r.type_name());
    bool ints = (l.is_int() || l.is_bool()) && (r.is_int() || r.is_bool());
    auto li = [&](const Value& v) { return v.is_bool() ? static_cast<int64_t>(v.as_bool()) : v.as_int(); };
    if (ints && (op == "+" || op == "-" || op == "*")) {
      int64_t result = 0;
      const bool overflowed = op == "+"   ? __builtin_add_overflow(li(l), li(r), &result)
                              : op == "-" ? __builtin_sub_overflow(li(l), li(r), &result)
                                          : __builtin_mul_overflow(li(l), li(r), &result);
      return Value(checked(n, overflowed, result, op));
    }
    if (op == "+") return Value(l.as_number() + r.as_number());
    if (op == "-") return Value(l.as_number() - r.as_number());
    if (op == "*") return Value(l.as_number() * r.as_number());
    if (op == "**")
      return ints && li(r) >= 0 ? Value(int_power(n, li(l), li(r)))
                                : Value(std::pow(l.as_number(), r.as_number()));
    if (r.as_number() == 0) err(n, "division by zero");
    if (op == "/") return Value(l.as_number() / r.as_number());
    if (op == "//") {
      if (ints) {
        int64_t a = li(l), b = li(r);
        checked(n, a == INT64_MIN && b == -1, 0, op);
        int64_t q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
        return Value(q);
      }
      return Value(std::floor(l.as_number() / r.as_number()));
    }
    if (op == "%") {
      if (ints) {
        int64_t a = li(l), b = li(r);
        if (b == -1) return Value(int64_t{0});  // INT64_MIN % -1 traps in hardware; every x % -1 is 0
        int64_t m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) m += b;
        return Value(m);
      }
      double m = std::fmod(l.as_number(), r.as_number());
      if (m != 0 && ((m < 0) != (r.as_number() < 0))) m += r.as_number();
      return Value(m);
    }
    err(n, "unsupported operator '", op, "'");
  }

  std::string name_;
  std::vector<std::map<std::string, Value>> scopes_;
  int64_t steps_ = 0;
  int depth_ = 0;
};

}  // namespace

Template::Template(const std::string& source, std::string name) : name_(std::move(name)) {
  root_ = parse_template(source, name_);
}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const std::map<std::string, Value>& globals) const {
  Evaluator ev(name_, globals);
  std::string out;
  ev.exec_block(root_->a, out);
  return out;
}

}  // namespace dllm::jinja
