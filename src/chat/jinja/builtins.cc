// jinja2's filters and tests that chat templates use, with jinja2 3.1's
// semantics (soft_str on Undefined, first/last/default/int/float fallbacks,
// dotted attribute paths in map/selectattr/sort), transformers' tojson
// (json.dumps, ensure_ascii off by default) and the globals transformers
// defines: range, namespace, dict, raise_exception and strftime_now.
#include <algorithm>
#include <cmath>
#include <ctime>

#include "chat/jinja/builtins.h"
#include "chat/jinja/python_text.h"

namespace anymoe::jinja {
namespace {

Value SoftStr(const Value& v) { return Value::Str(ToStr(v)); }

bool HasInput(const Value& v, int depth = 0) {
  if (depth > 200) return true;
  if (v.is_string()) return !v.str_data().input.empty();
  if (v.is_list()) {
    for (const Value& x : v.items()) {
      if (HasInput(x, depth + 1)) return true;
    }
  }
  if (v.is_dict()) {
    for (const auto& [k, x] : v.dict().entries) {
      if (HasInput(k, depth + 1) || HasInput(x, depth + 1)) return true;
    }
  }
  return false;
}

Value WholeOrMarkup(std::string text, bool input) {
  ChargeAlloc(text.size());
  return input ? Value::InputStr(std::move(text)) : Value::Str(std::move(text));
}

bool BoolArg(const Value& v, bool fallback) { return v.is_undefined() ? fallback : v.Truthy(); }

// jinja2's make_attrgetter: "a.b.0" walks attributes / items.
Value AttrPath(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      v = GetItem(v, Value::Int(std::stoll(part)));
    } else {
      v = GetItem(v, Value::Str(part));
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

Value CaseKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::Str(PyLower(v.str()));
  return v;
}

std::vector<Value> Rest(const CallArgs& a, size_t from) {
  if (a.positional.size() <= from) return {};
  return {a.positional.begin() + long(from), a.positional.end()};
}

// select / reject / selectattr / rejectattr.
Value SelectOrReject(const Value& seq, const CallArgs& a, bool attr, bool select) {
  std::string attribute;
  size_t next = 0;
  if (attr) {
    const Value name = a.Get(0, "attribute");
    if (!name.is_string()) Fail("selectattr needs an attribute name");
    attribute = name.str();
    next = 1;
  }
  const Value test_name = a.Get(next, "test");
  CallArgs test_args;
  test_args.positional = Rest(a, next + 1);
  std::vector<Value> out;
  for (const Value& item : Iterate(seq)) {
    const Value x = attr ? AttrPath(item, attribute) : item;
    const bool pass = test_name.is_undefined() ? x.Truthy() : ApplyTest(ToPython(test_name), x, test_args);
    if (pass == select) out.push_back(item);
  }
  ChargeAlloc(out.size() * sizeof(Value));
  return Value::List(std::move(out));
}

std::vector<Value> Sorted(std::vector<Value> items, bool reverse, bool case_sensitive,
                          const Value& attribute) {
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const Value kx = CaseKey(attribute.is_string() ? AttrPath(x, attribute.str()) : x, case_sensitive);
    const Value ky = CaseKey(attribute.is_string() ? AttrPath(y, attribute.str()) : y, case_sensitive);
    return reverse ? Less(ky, kx) : Less(kx, ky);
  });
  return items;
}

bool ParsePyInt(std::string s, int base, int64_t* out) {
  s = std::string(PyStrip(s, kStripBoth, nullptr));
  std::string digits;
  for (char c : s) {
    if (c != '_') digits += c;
  }
  if (digits.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (errno != 0 || *end != 0) return false;
  *out = v;
  return true;
}

bool ParsePyFloat(const std::string& raw, double* out) {
  const std::string s(PyStrip(raw, kStripBoth, nullptr));
  if (s.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != 0) return false;
  // Python accepts inf/nan spellings but not hex floats.
  if (s.find('x') != std::string::npos || s.find('X') != std::string::npos) return false;
  *out = v;
  return true;
}

Value Indent(const Value& input, const CallArgs& a) {
  const Value width_v = a.Get(0, "width");
  std::string indention = width_v.is_string() ? width_v.str() : std::string(size_t(width_v.is_undefined() ? 4 : std::max<int64_t>(0, width_v.int_value())), ' ');
  const bool first = BoolArg(a.Get(1, "first"), false);
  const bool blank = BoolArg(a.Get(2, "blank"), false);
  const std::string s = ToPython(input) + "\n";
  std::vector<std::string> lines = PySplitLines(s);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : indention + lines[i]);
  }
  if (first) rv = indention + rv;
  return Derived(std::move(rv), {&input});
}

Value ToJson(const Value& input, const CallArgs& a) {
  JsonDumpOptions o;
  o.ensure_ascii = BoolArg(a.Get(0, "ensure_ascii"), false);
  const Value indent = a.Get(1, "indent");
  if (indent.is_int()) o.indent = std::max<int64_t>(0, indent.int_value());
  const Value separators = a.Get(2, "separators");
  if (separators.is_list() && separators.items().size() == 2 && separators.items()[0].is_string() &&
      separators.items()[1].is_string()) {
    o.custom_separators = true;
    o.item_separator = separators.items()[0].str();
    o.key_separator = separators.items()[1].str();
  }
  o.sort_keys = BoolArg(a.Get(3, "sort_keys"), false);
  return WholeOrMarkup(PyJsonDumps(input, o), HasInput(input));
}

Value Round(const Value& input, const CallArgs& a) {
  if (!input.is_number()) Fail("round() needs a number");
  const int64_t precision = a.Get(0, "precision").is_undefined() ? 0 : a.Get(0, "precision").int_value();
  const Value method_v = a.Get(1, "method");
  const std::string method = method_v.is_string() ? method_v.str() : "common";
  const double scale = std::pow(10.0, double(precision));
  const double x = input.float_value() * scale;
  double r;
  if (method == "ceil") r = std::ceil(x);
  else if (method == "floor") r = std::floor(x);
  else if (method == "common") r = std::nearbyint(x);  // Python's round: half to even
  else Fail("method must be common, ceil or floor");
  return Value::Float(r / scale);
}

Value Html(const Value& input) {
  std::string out;
  for (char c : ToPython(input)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Derived(std::move(out), {&input});
}

}  // namespace

Value ApplyFilter(const std::string& name, const Value& input, const CallArgs& a) {
  if (name == "tojson") return ToJson(input, a);
  if (name == "safe") return input;
  if (name == "string") return SoftStr(input);
  if (name == "default" || name == "d") {
    const bool boolean = BoolArg(a.Get(1, "boolean"), false);
    if (input.is_undefined() || (boolean && !input.Truthy())) {
      const Value d = a.Get(0, "default_value");
      return d.is_undefined() ? Value::Str("") : d;
    }
    return input;
  }
  if (name == "length" || name == "count") {
    if (input.is_undefined()) return Value::Int(0);
    if (input.is_string()) return Value::Int(int64_t(CodePoints(input.str()).size()));
    if (input.is_list()) return Value::Int(int64_t(input.items().size()));
    if (input.is_dict() || input.is_namespace()) return Value::Int(int64_t(input.dict().entries.size()));
    Fail(std::string("object of type '") + TypeName(input) + "' has no len()");
  }
  if (name == "trim") {
    const Value s = SoftStr(input);
    const Value chars = a.Get(0, "chars");
    return Derived(std::string(PyStrip(s.str(), kStripBoth, chars.is_string() ? &chars.str() : nullptr)), {&s});
  }
  if (name == "lower") { const Value s = SoftStr(input); return Derived(PyLower(s.str()), {&s}); }
  if (name == "upper") { const Value s = SoftStr(input); return Derived(PyUpper(s.str()), {&s}); }
  if (name == "title") { const Value s = SoftStr(input); return Derived(JinjaTitle(s.str()), {&s}); }
  if (name == "capitalize") { const Value s = SoftStr(input); return Derived(PyCapitalize(s.str()), {&s}); }
  if (name == "replace") {
    const Value s = SoftStr(input);
    CallArgs args;
    args.positional = {SoftStr(a.Get(0, "old")), SoftStr(a.Get(1, "new"))};
    const Value count = a.Get(2, "count");
    if (!count.is_undefined()) args.positional.push_back(count);
    return GetAttr(s, "replace").callable().fn(args);
  }
  if (name == "items") {
    if (input.is_undefined()) return Value::List({});
    if (!input.is_dict()) Fail("Can only get item pairs from a mapping.");
    return GetAttr(input, "items").callable().fn({});
  }
  if (name == "list") {
    std::vector<Value> items = Iterate(input);
    ChargeAlloc(items.size() * sizeof(Value));
    return Value::List(std::move(items));
  }
  if (name == "first") {
    const std::vector<Value> items = Iterate(input);
    return items.empty() ? Value::Undefined("first") : items.front();
  }
  if (name == "last") {
    if (input.is_undefined() || input.is_namespace()) Fail("'Undefined' object is not reversible");
    const std::vector<Value> items = Iterate(input);
    return items.empty() ? Value::Undefined("last") : items.back();
  }
  if (name == "join") {
    const Value sep = a.Get(0, "d");
    const Value attribute = a.Get(1, "attribute");
    StrBuilder b;
    bool first = true;
    for (const Value& item : Iterate(input)) {
      if (!first && !sep.is_undefined()) b.Append(*ToStr(sep));
      first = false;
      b.Append(*ToStr(attribute.is_string() ? AttrPath(item, attribute.str()) : item));
    }
    return b.TakeValue();
  }
  if (name == "map") {
    std::vector<Value> out;
    const Value attribute = a.Get(99, "attribute");
    for (const Value& item : Iterate(input)) {
      if (attribute.is_string()) {
        Value v = AttrPath(item, attribute.str());
        if (v.is_undefined()) {
          if (const Value* d = a.Keyword("default")) v = *d;
        }
        out.push_back(v);
      } else {
        if (a.positional.empty()) Fail("map requires a filter argument");
        CallArgs rest;
        rest.positional = Rest(a, 1);
        out.push_back(ApplyFilter(ToPython(a.positional[0]), item, rest));
      }
    }
    ChargeAlloc(out.size() * sizeof(Value));
    return Value::List(std::move(out));
  }
  if (name == "select") return SelectOrReject(input, a, false, true);
  if (name == "reject") return SelectOrReject(input, a, false, false);
  if (name == "selectattr") return SelectOrReject(input, a, true, true);
  if (name == "rejectattr") return SelectOrReject(input, a, true, false);
  if (name == "int") {
    const Value d = a.Get(0, "default");
    const Value base_v = a.Get(1, "base");
    const int base = base_v.is_int() ? int(base_v.int_value()) : 10;
    int64_t i;
    if (input.is_string() && ParsePyInt(input.str(), base, &i)) return Value::Int(i);
    if (input.is_int() || input.is_bool()) return Value::Int(input.int_value());
    if (input.is_float() && std::isfinite(input.float_value())) return Value::Int(int64_t(input.float_value()));
    double f;
    if (input.is_string() && ParsePyFloat(input.str(), &f) && std::isfinite(f)) return Value::Int(int64_t(f));
    return d.is_undefined() ? Value::Int(0) : d;
  }
  if (name == "float") {
    const Value d = a.Get(0, "default");
    double f;
    if (input.is_number()) return Value::Float(input.float_value());
    if (input.is_string() && ParsePyFloat(input.str(), &f)) return Value::Float(f);
    return d.is_undefined() ? Value::Float(0.0) : d;
  }
  if (name == "abs") {
    if (input.is_float()) return Value::Float(std::fabs(input.float_value()));
    if (input.is_number()) return Value::Int(std::llabs(input.int_value()));
    Fail(std::string("bad operand type for abs(): '") + TypeName(input) + "'");
  }
  if (name == "round") return Round(input, a);
  if (name == "indent") return Indent(input, a);
  if (name == "dictsort") {
    if (!input.is_dict()) Fail("dictsort needs a mapping");
    const bool case_sensitive = BoolArg(a.Get(0, "case_sensitive"), false);
    const Value by = a.Get(1, "by");
    const size_t pos = by.is_string() && by.str() == "value" ? 1 : 0;
    const bool reverse = BoolArg(a.Get(2, "reverse"), false);
    std::vector<Value> items;
    for (const auto& [k, v] : input.dict().entries) items.push_back(Value::List({k, v}, true));
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      const Value kx = CaseKey(x.items()[pos], case_sensitive), ky = CaseKey(y.items()[pos], case_sensitive);
      return reverse ? Less(ky, kx) : Less(kx, ky);
    });
    return Value::List(std::move(items));
  }
  if (name == "sort") {
    return Value::List(Sorted(Iterate(input), BoolArg(a.Get(0, "reverse"), false),
                              BoolArg(a.Get(1, "case_sensitive"), false), a.Get(2, "attribute")));
  }
  if (name == "reverse") {
    if (input.is_string()) {
      std::vector<uint32_t> cps = CodePoints(input.str());
      std::reverse(cps.begin(), cps.end());
      return Derived(FromCodePoints(cps, 0, cps.size()), {&input});
    }
    std::vector<Value> items = Iterate(input);
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (name == "unique") {
    const bool case_sensitive = BoolArg(a.Get(0, "case_sensitive"), false);
    const Value attribute = a.Get(1, "attribute");
    std::vector<Value> out, seen;
    for (const Value& item : Iterate(input)) {
      const Value key = CaseKey(attribute.is_string() ? AttrPath(item, attribute.str()) : item, case_sensitive);
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return Equal(s, key); })) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return Value::List(std::move(out));
  }
  if (name == "sum") {
    const Value attribute = a.Get(0, "attribute");
    Value total = a.Get(1, "start").is_undefined() ? Value::Int(0) : a.Get(1, "start");
    for (const Value& item : Iterate(input)) {
      total = BinaryOp("+", total, attribute.is_string() ? AttrPath(item, attribute.str()) : item);
    }
    return total;
  }
  if (name == "min" || name == "max") {
    const std::vector<Value> items = Sorted(Iterate(input), false, BoolArg(a.Get(0, "case_sensitive"), false),
                                            a.Get(1, "attribute"));
    if (items.empty()) return Value::Undefined(name);
    return name == "min" ? items.front() : items.back();
  }
  if (name == "escape" || name == "e" || name == "forceescape") return Html(input);
  if (name == "format") {
    if (!a.keyword.empty()) Fail("format filter with keyword arguments is not supported");
    return BinaryOp("%", SoftStr(input), Value::List(a.positional, true));
  }
  if (name == "attr") return GetAttr(input, ToPython(a.Get(0, "name")));
  if (name == "pprint") return Derived(Repr(input), {&input});
  if (name == "wordcount") {
    return Value::Int(int64_t(PySplit(ToPython(input), nullptr, -1, false).size()));
  }
  if (name == "center") {
    const Value s = SoftStr(input);
    const int64_t width = a.Get(0, "width").is_undefined() ? 80 : a.Get(0, "width").int_value();
    const int64_t len = int64_t(CodePoints(s.str()).size());
    if (width <= len) return s;
    const int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
    ChargeAlloc(size_t(width));
    return Derived(std::string(size_t(left), ' ') + s.str() + std::string(size_t(pad - left), ' '), {&s});
  }
  Fail("no filter named '" + name + "'", "TemplateAssertionError");
}

bool ApplyTest(const std::string& name, const Value& v, const CallArgs& a) {
  const Value arg = a.Get(0, "other");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_undefined() || v.is_list() || v.is_dict() || v.is_string();
  if (name == "sequence") return v.is_undefined() || v.is_list() || v.is_dict() || v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.bool_value();
  if (name == "false") return v.is_bool() && !v.bool_value();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "in") return Contains(arg, v);
  if (name == "eq" || name == "equalto" || name == "==") return Equal(v, arg);
  if (name == "ne" || name == "!=") return !Equal(v, arg);
  if (name == "lt" || name == "lessthan" || name == "<") return Less(v, arg);
  if (name == "le" || name == "<=") return !Less(arg, v);
  if (name == "gt" || name == "greaterthan" || name == ">") return Less(arg, v);
  if (name == "ge" || name == ">=") return !Less(v, arg);
  if (name == "sameas") {
    if (v.kind() != arg.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.bool_value() == arg.bool_value();
    return Equal(v, arg) && (v.is_int() || (v.is_string() && &v.str() == &arg.str()));
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_int() && !v.is_bool()) Fail("test '" + name + "' needs an integer");
    if (name == "divisibleby") {
      if (!arg.is_int() || arg.int_value() == 0) Fail("divisibleby needs a non-zero integer", "ZeroDivisionError");
      return v.int_value() % arg.int_value() == 0;
    }
    return (std::llabs(v.int_value()) % 2 == 1) == (name == "odd");
  }
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    const std::string s = v.str();
    return name == "lower" ? (PyLower(s) == s && PyUpper(s) != s) : (PyUpper(s) == s && PyLower(s) != s);
  }
  Fail("no test named '" + name + "'", "TemplateAssertionError");
}

std::vector<std::pair<std::string, Value>> Globals(const RenderOptions& options) {
  std::vector<std::pair<std::string, Value>> g;
  const auto add = [&](const char* name, std::function<Value(const CallArgs&)> fn) {
    auto c = std::make_shared<Callable>();
    c->name = name;
    c->fn = std::move(fn);
    g.emplace_back(name, Value::Function(std::move(c)));
  };
  add("raise_exception", [](const CallArgs& a) -> Value {
    Fail(ToPython(a.Get(0, "message")), "TemplateError");
  });
  add("range", [](const CallArgs& a) -> Value {
    std::vector<int64_t> p;
    for (const Value& v : a.positional) {
      if (!v.is_int() && !v.is_bool()) Fail(std::string("'") + TypeName(v) + "' object cannot be interpreted as an integer");
      p.push_back(v.int_value());
    }
    if (p.empty() || p.size() > 3) Fail("range expected 1 to 3 arguments");
    const int64_t start = p.size() == 1 ? 0 : p[0], stop = p.size() == 1 ? p[0] : p[1];
    const int64_t step = p.size() == 3 ? p[2] : 1;
    if (step == 0) Fail("range() arg 3 must not be zero", "ValueError");
    const double count = std::max(0.0, std::ceil((double(stop) - double(start)) / double(step)));
    ChargeAlloc(size_t(std::min(count, 1e15)) * sizeof(Value));
    std::vector<Value> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::Int(i));
    return Value::List(std::move(out));
  });
  const auto make_dict = [](const CallArgs& a, bool ns) {
    auto d = std::make_shared<DictData>();
    if (!a.positional.empty()) {
      const Value& src = a.positional[0];
      if (src.is_dict()) {
        d->entries = src.dict().entries;
      } else {
        for (const Value& pair : Iterate(src)) {
          const std::vector<Value> kv = Iterate(pair);
          if (kv.size() != 2) Fail("dictionary update sequence element has wrong length", "ValueError");
          d->Set(kv[0], kv[1]);
        }
      }
    }
    for (const auto& [k, v] : a.keyword) d->Set(Value::Str(k), v);
    if (ns) {
      for (const auto& [k, v] : d->entries) {
        if (k.is_string() && !k.str().empty() && k.str()[0] == '_') {
          Fail("cannot store underscore-prefixed attributes on a namespace", "SecurityError");
        }
      }
    }
    return d;
  };
  add("namespace", [make_dict](const CallArgs& a) { return Value::Namespace(make_dict(a, true)); });
  add("dict", [make_dict](const CallArgs& a) { return Value::Dict(make_dict(a, false)); });
  const std::optional<std::tm> fixed = options.now;
  add("strftime_now", [fixed](const CallArgs& a) -> Value {
    const Value fmt = a.Get(0, "format");
    if (!fmt.is_string()) Fail("strftime_now needs a format string");
    std::tm tm{};
    if (fixed) {
      tm = *fixed;
    } else {
      const std::time_t t = std::time(nullptr);
      localtime_r(&t, &tm);
    }
    char buf[512];
    const size_t n = std::strftime(buf, sizeof(buf), fmt.str().c_str(), &tm);
    return Value::Str(std::string(buf, n));
  });
  return g;
}

}  // namespace anymoe::jinja
