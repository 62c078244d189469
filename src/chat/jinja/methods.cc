// Attribute and item lookup as jinja2's sandbox does it (a dict's methods win
// over its keys on `.`, keys win on `[]`; underscore names are never reachable;
// mutating methods are refused as in ImmutableSandboxedEnvironment), the Python
// methods of str/dict/list that templates call, slicing, iteration and operators.
#include <climits>
#include <cmath>

#include "chat/jinja/builtins.h"
#include "chat/jinja/python_text.h"
#include "tokenizer/unicode_class.h"

namespace anymoe::jinja {
namespace {

thread_local Budget* g_budget = nullptr;

bool AnyInput(std::initializer_list<const Value*> sources) {
  for (const Value* v : sources) {
    if (v->is_string() && !v->str_data().input.empty()) return true;
  }
  return false;
}

Value Method(std::string name, std::function<Value(const CallArgs&)> fn) {
  auto c = std::make_shared<Callable>();
  c->name = std::move(name);
  c->fn = std::move(fn);
  return Value::Function(std::move(c));
}

Value Unsafe(const std::string& type, const std::string& name) {
  return Method(name, [type, name](const CallArgs&) -> Value {
    Fail("access to attribute '" + name + "' of '" + type + "' object is unsafe", "SecurityError");
  });
}

const std::string* OptionalString(const Value& v, const char* what) {
  if (v.is_undefined() || v.is_none()) return nullptr;
  if (!v.is_string()) Fail(std::string(what) + " arg must be None or str");
  return &v.str();
}

int64_t IntArg(const Value& v, int64_t fallback) {
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_int() && !v.is_bool()) Fail(std::string("'") + TypeName(v) + "' object cannot be interpreted as an integer");
  return v.int_value();
}

Value StringList(const std::vector<std::string>& parts, const Value& source) {
  std::vector<Value> items;
  for (const std::string& p : parts) items.push_back(Derived(p, {&source}));
  return Value::List(std::move(items));
}

bool PrefixTest(const Value& self, const Value& arg, bool prefix) {
  const std::string& s = self.str();
  const auto one = [&](const Value& p) {
    if (!p.is_string()) Fail("startswith first arg must be str or a tuple of str");
    const std::string& x = p.str();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg.is_list()) {
    for (const Value& p : arg.items()) {
      if (one(p)) return true;
    }
    return false;
  }
  return one(arg);
}

Value StringMethod(const Value& self, std::string_view name) {
  const std::string n(name);
  if (n == "strip" || n == "lstrip" || n == "rstrip") {
    const int side = n == "strip" ? kStripBoth : n == "lstrip" ? kStripLeft : kStripRight;
    return Method(n, [self, side](const CallArgs& a) {
      const std::string* chars = OptionalString(a.Get(0, "chars"), "strip");
      return Derived(std::string(PyStrip(self.str(), side, chars)), {&self});
    });
  }
  if (n == "split" || n == "rsplit") {
    const bool right = n == "rsplit";
    return Method(n, [self, right](const CallArgs& a) {
      const std::string* sep = OptionalString(a.Get(0, "sep"), "split");
      const std::vector<std::string> parts =
          PySplit(self.str(), sep, IntArg(a.Get(1, "maxsplit"), -1), right);
      ChargeAlloc(self.str().size() + parts.size() * sizeof(Value));
      return StringList(parts, self);
    });
  }
  if (n == "splitlines") {
    return Method(n, [self](const CallArgs&) { return StringList(PySplitLines(self.str()), self); });
  }
  if (n == "startswith" || n == "endswith") {
    const bool prefix = n == "startswith";
    return Method(n, [self, prefix](const CallArgs& a) {
      return Value::Bool(PrefixTest(self, a.Get(0, "prefix"), prefix));
    });
  }
  if (n == "replace") {
    return Method(n, [self](const CallArgs& a) {
      const Value old_v = a.Get(0, "old"), new_v = a.Get(1, "new");
      if (!old_v.is_string() || !new_v.is_string()) Fail("replace() arguments must be str");
      int64_t count = IntArg(a.Get(2, "count"), -1);
      const std::string& s = self.str();
      const std::string& o = old_v.str();
      std::string out;
      if (o.empty()) {  // Python inserts `new` between characters
        const std::vector<uint32_t> cps = CodePoints(s);
        for (size_t i = 0; i <= cps.size(); ++i) {
          if (count != 0) {
            out += new_v.str();
            if (count > 0) --count;
          }
          if (i < cps.size()) AppendUtf8(cps[i], &out);
          ChargeAlloc(new_v.str().size() + 4);
        }
      } else {
        size_t pos = 0;
        while (count != 0) {
          const size_t hit = s.find(o, pos);
          if (hit == std::string::npos) break;
          out.append(s, pos, hit - pos);
          out += new_v.str();
          ChargeAlloc(new_v.str().size() + hit - pos);
          pos = hit + o.size();
          if (count > 0) --count;
        }
        out.append(s, pos, std::string::npos);
      }
      ChargeAlloc(out.size());
      return Derived(std::move(out), {&self, &new_v});
    });
  }
  if (n == "upper") return Method(n, [self](const CallArgs&) { return Derived(PyUpper(self.str()), {&self}); });
  if (n == "lower") return Method(n, [self](const CallArgs&) { return Derived(PyLower(self.str()), {&self}); });
  if (n == "title") return Method(n, [self](const CallArgs&) { return Derived(PyTitle(self.str()), {&self}); });
  if (n == "capitalize") {
    return Method(n, [self](const CallArgs&) { return Derived(PyCapitalize(self.str()), {&self}); });
  }
  if (n == "find" || n == "rfind" || n == "count" || n == "index" || n == "rindex") {
    return Method(n, [self, n](const CallArgs& a) {
      const Value sub = a.Get(0, "sub");
      if (!sub.is_string()) Fail("must be str, not " + std::string(TypeName(sub)));
      const std::string& s = self.str();
      const std::vector<uint32_t> cps = CodePoints(s);
      const auto cp_index = [&](size_t byte) { return int64_t(CodePoints(s.substr(0, byte)).size()); };
      if (n == "count") {
        if (sub.str().empty()) return Value::Int(int64_t(cps.size()) + 1);
        int64_t c = 0;
        for (size_t p = s.find(sub.str()); p != std::string::npos; p = s.find(sub.str(), p + sub.str().size())) ++c;
        return Value::Int(c);
      }
      const size_t hit = (n == "find" || n == "index") ? s.find(sub.str()) : s.rfind(sub.str());
      if (hit == std::string::npos) {
        if (n == "index" || n == "rindex") Fail("substring not found", "ValueError");
        return Value::Int(-1);
      }
      return Value::Int(cp_index(hit));
    });
  }
  if (n == "join") {
    return Method(n, [self](const CallArgs& a) {
      StrBuilder b;
      bool first = true;
      for (const Value& item : Iterate(a.Get(0, "iterable"))) {
        if (!item.is_string()) Fail("sequence item: expected str instance, " + std::string(TypeName(item)) + " found");
        if (!first) b.Append(self.str_data());
        first = false;
        b.Append(item.str_data());
      }
      return b.TakeValue();
    });
  }
  if (n == "isdigit" || n == "isspace" || n == "isalpha" || n == "isalnum" || n == "islower" ||
      n == "isupper") {
    return Method(n, [self, n](const CallArgs&) {
      const std::vector<uint32_t> cps = CodePoints(self.str());
      if (cps.empty()) return Value::Bool(false);
      bool cased = false;
      for (uint32_t c : cps) {
        const std::string one = FromCodePoints({c}, 0, 1);
        const bool digit = c >= '0' && c <= '9';
        const bool alpha = PyUpper(one) != PyLower(one);
        if (n == "isdigit" && !digit) return Value::Bool(false);
        if (n == "isspace" && !PyIsSpace(c)) return Value::Bool(false);
        if (n == "isalpha" && !alpha) return Value::Bool(false);
        if (n == "isalnum" && !alpha && !digit) return Value::Bool(false);
        if (n == "islower" && alpha && PyLower(one) != one) return Value::Bool(false);
        if (n == "isupper" && alpha && PyUpper(one) != one) return Value::Bool(false);
        cased |= alpha;
      }
      return Value::Bool((n != "islower" && n != "isupper") || cased);
    });
  }
  if (n == "removeprefix" || n == "removesuffix") {
    return Method(n, [self, n](const CallArgs& a) {
      const Value x = a.Get(0, "prefix");
      if (!x.is_string()) Fail("argument must be str");
      const std::string& s = self.str();
      const std::string& p = x.str();
      if (n == "removeprefix" && s.compare(0, p.size(), p) == 0) return Derived(s.substr(p.size()), {&self});
      if (n == "removesuffix" && p.size() <= s.size() && s.compare(s.size() - p.size(), p.size(), p) == 0) {
        return Derived(s.substr(0, s.size() - p.size()), {&self});
      }
      return self;
    });
  }
  if (n == "format") {
    return Method(n, [self](const CallArgs& a) {
      // Positional "{}" / "{0}" and keyword "{name}" fields.
      const std::string& s = self.str();
      StrBuilder b;
      size_t next = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '{') { b.AppendMarkup("{"); ++i; continue; }
        if (s[i] == '}' && i + 1 < s.size() && s[i + 1] == '}') { b.AppendMarkup("}"); ++i; continue; }
        if (s[i] != '{') { b.AppendMarkup(std::string_view(&s[i], 1)); continue; }
        const size_t close = s.find('}', i);
        if (close == std::string::npos) Fail("Single '{' encountered in format string", "ValueError");
        const std::string field = s.substr(i + 1, close - i - 1);
        Value v;
        if (field.empty()) v = a.Get(next++, "");
        else if (std::isdigit(static_cast<unsigned char>(field[0]))) v = a.Get(size_t(std::stoul(field)), "");
        else if (const Value* kw = a.Keyword(field)) v = *kw;
        if (v.is_undefined()) Fail("format field '" + field + "' has no argument", "IndexError");
        b.Append(*ToStr(v));
        i = close;
      }
      return b.TakeValue();
    });
  }
  return Value::Undefined(n);
}

Value DictMethod(const Value& self, std::string_view name) {
  const std::string n(name);
  if (n == "items") {
    return Method(n, [self](const CallArgs&) {
      std::vector<Value> out;
      for (const auto& [k, v] : self.dict().entries) out.push_back(Value::List({k, v}, true));
      ChargeAlloc(out.size() * 3 * sizeof(Value));
      return Value::List(std::move(out));
    });
  }
  if (n == "keys" || n == "values") {
    const bool keys = n == "keys";
    return Method(n, [self, keys](const CallArgs&) {
      std::vector<Value> out;
      for (const auto& [k, v] : self.dict().entries) out.push_back(keys ? k : v);
      ChargeAlloc(out.size() * sizeof(Value));
      return Value::List(std::move(out));
    });
  }
  if (n == "get") {
    return Method(n, [self](const CallArgs& a) {
      const Value* v = self.dict().Find(a.Get(0, "key"));
      if (v) return *v;
      const Value d = a.Get(1, "default");
      return d.is_undefined() ? Value::None() : d;
    });
  }
  if (n == "copy") {
    return Method(n, [self](const CallArgs&) {
      auto d = std::make_shared<DictData>(self.dict());
      return Value::Dict(std::move(d));
    });
  }
  if (n == "pop" || n == "popitem" || n == "update" || n == "setdefault" || n == "clear" ||
      n == "fromkeys") {
    return Unsafe("dict", n);
  }
  return Value::Undefined(n);
}

Value ListMethod(const Value& self, std::string_view name) {
  const std::string n(name);
  if (n == "index" || n == "count") {
    return Method(n, [self, n](const CallArgs& a) {
      const Value x = a.Get(0, "value");
      int64_t c = 0;
      for (size_t i = 0; i < self.items().size(); ++i) {
        if (!Equal(self.items()[i], x)) continue;
        if (n == "index") return Value::Int(int64_t(i));
        ++c;
      }
      if (n == "index") Fail(Repr(x) + " is not in list", "ValueError");
      return Value::Int(c);
    });
  }
  if (n == "append" || n == "extend" || n == "insert" || n == "pop" || n == "remove" ||
      n == "sort" || n == "reverse" || n == "clear") {
    return Unsafe(TypeName(self), n);
  }
  return Value::Undefined(n);
}

// Python slice.indices for a sequence of length n.
std::vector<int64_t> SliceIndices(int64_t n, const Value& start_v, const Value& stop_v, const Value& step_v) {
  const auto as_int = [](const Value& v, bool* present) -> int64_t {
    *present = !(v.is_none() || v.is_undefined());
    if (!*present) return 0;
    if (!v.is_int() && !v.is_bool()) Fail("slice indices must be integers or None");
    return v.int_value();
  };
  bool has_start, has_stop, has_step;
  int64_t start = as_int(start_v, &has_start), stop = as_int(stop_v, &has_stop);
  const int64_t step = as_int(step_v, &has_step);
  const int64_t st = has_step ? step : 1;
  if (st == 0) Fail("slice step cannot be zero", "ValueError");
  const auto clamp = [&](int64_t v, bool present, int64_t dflt) {
    if (!present) return dflt;
    if (v < 0) v += n;
    if (st > 0) return std::clamp<int64_t>(v, 0, n);
    return std::clamp<int64_t>(v, -1, n - 1);
  };
  start = clamp(start, has_start, st > 0 ? 0 : n - 1);
  stop = clamp(stop, has_stop, st > 0 ? n : -1);
  std::vector<int64_t> out;
  for (int64_t i = start; st > 0 ? i < stop : i > stop; i += st) out.push_back(i);
  return out;
}

int64_t CheckedInt(bool overflow, int64_t v) {
  if (overflow) Fail("integer result too large for the template engine", "OverflowError");
  return v;
}

Value FormatPercent(const Value& fmt, const Value& args) {
  const std::vector<Value> values = args.is_tuple() ? args.items() : std::vector<Value>{args};
  const std::string& s = fmt.str();
  StrBuilder b;
  size_t next = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') { b.AppendMarkup(std::string_view(&s[i], 1)); continue; }
    if (++i >= s.size()) Fail("incomplete format", "ValueError");
    const char c = s[i];
    if (c == '%') { b.AppendMarkup("%"); continue; }
    if (next >= values.size()) Fail("not enough arguments for format string");
    const Value& v = values[next++];
    if (c == 's') b.Append(*ToStr(v));
    else if (c == 'r') b.AppendMarkup(Repr(v));
    else if (c == 'd' || c == 'i') {
      if (!v.is_number()) Fail("%d format: a real number is required");
      b.AppendMarkup(std::to_string(v.is_float() ? int64_t(v.float_value()) : v.int_value()));
    } else {
      Fail(std::string("unsupported format character '") + c + "'", "ValueError");
    }
  }
  if (next < values.size()) Fail("not all arguments converted during string formatting");
  Value out = b.TakeValue();
  return AnyInput({&fmt}) ? Derived(out.str(), {&fmt}) : out;
}

}  // namespace

void SetBudget(Budget* budget) { g_budget = budget; }

void ChargeAlloc(size_t bytes) {
  if (!g_budget) return;
  if (bytes > g_budget->alloc_left) {
    Fail("template exceeded its memory budget of " + std::to_string(g_budget->alloc_limit) + " bytes", "ResourceLimit");
  }
  g_budget->alloc_left -= bytes;
}

void StrBuilder::Append(const StrData& s) {
  if (s.text.empty()) return;
  const size_t base = d_.text.size();
  d_.text += s.text;
  for (const TextRange& r : s.input) {
    if (!d_.input.empty() && d_.input.back().end == base + r.begin) {
      d_.input.back().end = base + r.end;
    } else {
      d_.input.push_back({base + r.begin, base + r.end});
    }
  }
}

void StrBuilder::AppendMarkup(std::string_view s) { d_.text += s; }

Value StrBuilder::TakeValue() {
  ChargeAlloc(d_.text.size());
  return Value::Str(std::make_shared<const StrData>(std::move(d_)));
}

Value Derived(std::string text, std::initializer_list<const Value*> sources) {
  ChargeAlloc(text.size());
  return AnyInput(sources) ? Value::InputStr(std::move(text)) : Value::Str(std::move(text));
}

void FailUndefined(const Value& v) {
  Fail("'" + (v.undefined_name().empty() ? std::string("value") : v.undefined_name()) +
           "' is undefined",
       "UndefinedError");
}

Value GetAttr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) FailUndefined(obj);
  if (!name.empty() && name[0] == '_') return Value::Undefined(std::string(name));
  switch (obj.kind()) {
    case ValueKind::kDict: {
      Value m = DictMethod(obj, name);
      if (!m.is_undefined()) return m;
      const Value* v = obj.dict().Find(name);
      return v ? *v : Value::Undefined(std::string(name));
    }
    case ValueKind::kNamespace: {
      const Value* v = obj.dict().Find(name);
      return v ? *v : Value::Undefined(std::string(name));
    }
    case ValueKind::kString: return StringMethod(obj, name);
    case ValueKind::kList: return ListMethod(obj, name);
    default: return Value::Undefined(std::string(name));
  }
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) FailUndefined(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().Find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (obj.is_list()) {
      const int64_t n = int64_t(obj.items().size());
      int64_t i = key.int_value();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined("[" + std::to_string(key.int_value()) + "]");
      return obj.items()[size_t(i)];
    }
    const std::vector<uint32_t> cps = CodePoints(obj.str());
    const int64_t n = int64_t(cps.size());
    int64_t i = key.int_value();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::Undefined("[" + std::to_string(key.int_value()) + "]");
    return Derived(FromCodePoints(cps, size_t(i), size_t(i) + 1), {&obj});
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined("[" + ToPython(key) + "]");
}

Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) FailUndefined(obj);
  if (obj.is_list()) {
    std::vector<Value> out;
    for (int64_t i : SliceIndices(int64_t(obj.items().size()), start, stop, step)) {
      out.push_back(obj.items()[size_t(i)]);
    }
    ChargeAlloc(out.size() * sizeof(Value));
    return Value::List(std::move(out), obj.is_tuple());
  }
  if (obj.is_string()) {
    const std::vector<uint32_t> cps = CodePoints(obj.str());
    std::string out;
    for (int64_t i : SliceIndices(int64_t(cps.size()), start, stop, step)) AppendUtf8(cps[size_t(i)], &out);
    return Derived(std::move(out), {&obj});
  }
  Fail(std::string("'") + TypeName(obj) + "' object is not subscriptable");
}

std::vector<Value> Iterate(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return {};
    case ValueKind::kList: return v.items();
    case ValueKind::kDict: {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.dict().entries) keys.push_back(k);
      return keys;
    }
    case ValueKind::kString: {
      std::vector<Value> chars;
      const std::vector<uint32_t> cps = CodePoints(v.str());
      ChargeAlloc(cps.size() * (sizeof(Value) + 32));
      for (size_t i = 0; i < cps.size(); ++i) chars.push_back(Derived(FromCodePoints(cps, i, i + 1), {&v}));
      return chars;
    }
    default: Fail(std::string("'") + TypeName(v) + "' object is not iterable");
  }
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case ValueKind::kUndefined: return false;
    case ValueKind::kString:
      if (!item.is_string()) {
        Fail(std::string("'in <string>' requires string as left operand, not ") + TypeName(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case ValueKind::kList:
      for (const Value& x : container.items()) {
        if (Equal(x, item)) return true;
      }
      return false;
    case ValueKind::kDict:
    case ValueKind::kNamespace: return container.dict().Find(item) != nullptr;
    default: Fail(std::string("argument of type '") + TypeName(container) + "' is not iterable");
  }
}

Value BinaryOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Value::Bool(Equal(a, b));
  if (op == "!=") return Value::Bool(!Equal(a, b));
  if (op == "in") return Value::Bool(Contains(b, a));
  if (op == "notin") return Value::Bool(!Contains(b, a));
  if (op == "~") {
    StrBuilder s;
    s.Append(*ToStr(a));
    s.Append(*ToStr(b));
    return s.TakeValue();
  }
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    if (op == "<") return Value::Bool(Less(a, b));
    if (op == ">") return Value::Bool(Less(b, a));
    if (op == "<=") return Value::Bool(!Less(b, a));
    return Value::Bool(!Less(a, b));
  }
  if (a.is_undefined()) FailUndefined(a);
  if (b.is_undefined()) FailUndefined(b);
  const auto unsupported = [&]() -> Value {
    if (op == "+" && a.is_string()) {
      Fail(std::string("can only concatenate str (not \"") + TypeName(b) + "\") to str");
    }
    Fail("unsupported operand type(s) for " + op + ": '" + TypeName(a) + "' and '" + TypeName(b) + "'");
  };
  if (a.is_number() && b.is_number()) {
    const bool ints = !a.is_float() && !b.is_float();
    const int64_t x = a.int_value(), y = b.int_value();
    const double fx = a.float_value(), fy = b.float_value();
    int64_t r = 0;
    if (op == "+" || op == "-" || op == "*") {
      if (!ints) return Value::Float(op == "+" ? fx + fy : op == "-" ? fx - fy : fx * fy);
      const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                            : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                        : __builtin_mul_overflow(x, y, &r);
      return Value::Int(CheckedInt(overflow, r));
    }
    if (op == "/") {
      if (fy == 0) Fail("division by zero", "ZeroDivisionError");
      return Value::Float(fx / fy);
    }
    if (op == "//" || op == "%") {
      if (ints ? y == 0 : fy == 0) Fail("integer division or modulo by zero", "ZeroDivisionError");
      if (ints) {
        if (x == INT64_MIN && y == -1) Fail("integer overflow", "OverflowError");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) { --q; m += y; }
        return Value::Int(op == "//" ? q : m);
      }
      const double q = std::floor(fx / fy);
      return Value::Float(op == "//" ? q : fx - q * fy);
    }
    if (op == "**") {
      if (ints && y >= 0) {
        int64_t result = 1;
        for (int64_t i = 0; i < y; ++i) {
          if (__builtin_mul_overflow(result, x, &result)) CheckedInt(true, 0);
          if (result == 0 || result == 1) break;
        }
        return Value::Int(result);
      }
      return Value::Float(std::pow(fx, fy));
    }
    return unsupported();
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    StrBuilder s;
    s.Append(a.str_data());
    s.Append(b.str_data());
    return s.TakeValue();
  }
  if (op == "+" && a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    std::vector<Value> out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    ChargeAlloc(out.size() * sizeof(Value));
    return Value::List(std::move(out), a.is_tuple());
  }
  if (op == "*" && (a.is_string() || a.is_list() || b.is_string() || b.is_list())) {
    const Value& seq = (a.is_string() || a.is_list()) ? a : b;
    const Value& count = (a.is_string() || a.is_list()) ? b : a;
    if (!count.is_int() && !count.is_bool()) return unsupported();
    int64_t n = std::max<int64_t>(0, count.int_value());
    if (seq.is_string() ? seq.str().empty() : seq.items().empty()) n = 0;
    if (seq.is_string()) {
      ChargeAlloc(size_t(std::min<int64_t>(n, INT64_MAX / int64_t(seq.str().size() + 1))) * seq.str().size());
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += seq.str();
      return Derived(std::move(out), {&seq});
    }
    ChargeAlloc(size_t(std::min<int64_t>(n, INT64_MAX / int64_t(sizeof(Value) * (seq.items().size() + 1)))) *
                seq.items().size() * sizeof(Value));
    std::vector<Value> out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
    return Value::List(std::move(out), seq.is_tuple());
  }
  if (op == "%" && a.is_string()) return FormatPercent(a, b);
  return unsupported();
}

}  // namespace anymoe::jinja
