#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"

namespace dllm::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}
Value* Dict::find(std::string_view key) {
  for (auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}
void Dict::set(const std::string& key, Value v) {
  if (Value* p = find(key))
    *p = std::move(v);
  else
    items.emplace_back(key, std::move(v));
}

namespace {

template <class J>
Value value_from_json(const J& j) {
  switch (j.type()) {
    case J::value_t::null:
      return Value(None{});
    case J::value_t::boolean:
      return Value(j.template get<bool>());
    case J::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case J::value_t::number_unsigned: {
      // Python keeps any integer exactly; ours are int64, so a larger one is refused rather than wrapped.
      const uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail("chat template: integer ", u, " is beyond the signed 64-bit range templates can hold");
      return Value(static_cast<int64_t>(u));
    }
    case J::value_t::number_float:
      return Value(j.template get<double>());
    case J::value_t::string:
      return Value(j.template get<std::string>());
    case J::value_t::array: {
      List l;
      for (const auto& e : j) l.push_back(value_from_json(e));
      return Value(std::move(l));
    }
    case J::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it)
        d.items.emplace_back(it.key(), value_from_json(it.value()));
      return Value(std::move(d));
    }
    default:
      return Value(None{});
  }
}

}  // namespace

Value Value::from_json(const nlohmann::json& j) {
  return value_from_json(j);
}
Value Value::from_json(const nlohmann::ordered_json& j) {
  return value_from_json(j);
}

bool Value::truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return as_bool();
  if (is_int()) return as_int() != 0;
  if (is_float()) return std::get<double>(v_) != 0.0;
  if (is_string()) return !as_string().empty();
  if (is_list()) return !as_list().empty();
  if (is_dict()) return is_namespace() || !as_dict().items.empty();
  return true;
}

namespace {

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Python repr: shortest round-trip representation, always with a '.' or exponent.
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string py_quote(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c == q) out += '\\';
        out += c;
    }
  }
  out += q;
  return out;
}

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void to_json_impl(const Value& v, std::string& out, int indent, int depth, bool sort_keys) {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  if (v.is_undefined() || v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    double d = v.as_number();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : format_float(d);
  } else if (v.is_string()) {
    json_string(out, v.as_string());
  } else if (v.is_list()) {
    const List& l = v.as_list();
    out += '[';
    if (l.empty()) {
      out += ']';
      return;
    }
    for (size_t i = 0; i < l.size(); ++i) {
      if (i) out += indent < 0 ? ", " : ",";
      newline(depth + 1);
      to_json_impl(l[i], out, indent, depth + 1, sort_keys);
    }
    newline(depth);
    out += ']';
  } else if (v.is_dict()) {
    std::vector<std::pair<std::string, Value>> items = v.as_dict().items;
    if (sort_keys)
      std::stable_sort(items.begin(), items.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    out += '{';
    if (items.empty()) {
      out += '}';
      return;
    }
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += indent < 0 ? ", " : ",";
      newline(depth + 1);
      json_string(out, items[i].first);
      out += ": ";
      to_json_impl(items[i].second, out, indent, depth + 1, sort_keys);
    }
    newline(depth);
    out += '}';
  } else {
    out += "null";
  }
}

}  // namespace

std::string Value::str() const {
  if (is_undefined()) return "";
  if (is_none()) return "None";
  if (is_bool()) return as_bool() ? "True" : "False";
  if (is_int()) return std::to_string(as_int());
  if (is_float()) return format_float(std::get<double>(v_));
  if (is_string()) return as_string();
  if (is_list()) {
    std::string out = tuple_ ? "(" : "[";
    const List& l = as_list();
    for (size_t i = 0; i < l.size(); ++i) {
      if (i) out += ", ";
      out += l[i].repr();
    }
    if (tuple_ && l.size() == 1) out += ",";
    return out + (tuple_ ? ")" : "]");
  }
  if (is_namespace()) return "<Namespace>";
  if (is_dict()) {
    std::string out = "{";
    const Dict& d = as_dict();
    for (size_t i = 0; i < d.items.size(); ++i) {
      if (i) out += ", ";
      out += py_quote(d.items[i].first) + ": " + d.items[i].second.repr();
    }
    return out + "}";
  }
  return "<function>";
}

std::string Value::repr() const {
  if (is_string()) return py_quote(as_string());
  if (is_undefined()) return "Undefined";
  return str();
}

std::string Value::to_json(int indent, bool sort_keys) const {
  std::string out;
  to_json_impl(*this, out, indent, 0, sort_keys);
  return out;
}

const char* Value::type_name() const {
  if (is_undefined()) return "undefined";
  if (is_none()) return "none";
  if (is_bool()) return "boolean";
  if (is_int()) return "integer";
  if (is_float()) return "float";
  if (is_string()) return "string";
  if (is_list()) return "list";
  if (is_namespace()) return "namespace";
  if (is_dict()) return "dict";
  return "function";
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_number() == b.as_number();
  if ((a.is_bool() || a.is_number()) && (b.is_bool() || b.is_number())) return a.as_number() == b.as_number();
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (a.is_none() && b.is_none()) return true;
  if (a.is_undefined() && b.is_undefined()) return true;
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!values_equal(x[i], y[i])) return false;
    return true;
  }
  if (a.is_dict() && b.is_dict()) {
    const Dict &x = a.as_dict(), &y = b.as_dict();
    if (x.items.size() != y.items.size()) return false;
    for (const auto& [k, v] : x.items) {
      const Value* o = y.find(k);
      if (!o || !values_equal(v, *o)) return false;
    }
    return true;
  }
  return false;
}

}  // namespace dllm::jinja
