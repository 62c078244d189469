// Value construction, Python equality/ordering/truthiness and str()/repr().
#include "chat/jinja/value.h"

#include <cmath>

#include "chat/jinja/python_text.h"

namespace anymoe::jinja {

void Fail(const std::string& message, const char* python_type) {
  throw JinjaError(python_type, message);
}

Value Value::Undefined(std::string name) {
  Value v;
  v.undefined_name_ = std::move(name);
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = ValueKind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = ValueKind::kBool;
  v.b_ = b;
  v.i_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = ValueKind::kInt;
  v.i_ = i;
  return v;
}
Value Value::Float(double f) {
  Value v;
  v.kind_ = ValueKind::kFloat;
  v.f_ = f;
  return v;
}
Value Value::Str(std::string s) {
  auto d = std::make_shared<StrData>();
  d->text = std::move(s);
  return Str(std::shared_ptr<const StrData>(std::move(d)));
}
Value Value::InputStr(std::string s) {
  auto d = std::make_shared<StrData>();
  d->text = std::move(s);
  if (!d->text.empty()) d->input.push_back({0, d->text.size()});
  return Str(std::shared_ptr<const StrData>(std::move(d)));
}
Value Value::Str(std::shared_ptr<const StrData> s) {
  Value v;
  v.kind_ = ValueKind::kString;
  v.s_ = std::move(s);
  return v;
}
Value Value::List(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind_ = ValueKind::kList;
  v.l_ = std::make_shared<ListData>();
  v.l_->items = std::move(items);
  v.l_->tuple = tuple;
  return v;
}
Value Value::Dict(std::shared_ptr<DictData> d) {
  Value v;
  v.kind_ = ValueKind::kDict;
  v.d_ = std::move(d);
  return v;
}
Value Value::Namespace(std::shared_ptr<DictData> d) {
  Value v;
  v.kind_ = ValueKind::kNamespace;
  v.d_ = std::move(d);
  return v;
}
Value Value::Function(std::shared_ptr<Callable> c) {
  Value v;
  v.kind_ = ValueKind::kCallable;
  v.c_ = std::move(c);
  return v;
}

const std::string& Value::str() const { return s_->text; }
const std::vector<Value>& Value::items() const { return l_->items; }
bool Value::is_tuple() const { return l_ && l_->tuple; }
const DictData& Value::dict() const { return *d_; }
DictData& Value::mutable_namespace() const { return *d_; }

bool Value::Truthy() const {
  switch (kind_) {
    case ValueKind::kUndefined:
    case ValueKind::kNone: return false;
    case ValueKind::kBool: return b_;
    case ValueKind::kInt: return i_ != 0;
    case ValueKind::kFloat: return f_ != 0;
    case ValueKind::kString: return !s_->text.empty();
    case ValueKind::kList: return !l_->items.empty();
    case ValueKind::kDict: return !d_->entries.empty();
    case ValueKind::kNamespace:
    case ValueKind::kCallable: return true;
  }
  return false;
}

const Value* DictData::Find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (Equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictData::Find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void DictData::Set(const Value& key, Value value) {
  for (auto& [k, v] : entries) {
    if (Equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(key, std::move(value));
}

const Value* CallArgs::Keyword(std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

Value CallArgs::Get(size_t index, std::string_view name) const {
  if (index < positional.size()) return positional[index];
  if (const Value* v = Keyword(name)) return *v;
  return Value::Undefined(std::string(name));
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.float_value() == b.float_value();
    return a.int_value() == b.int_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone: return true;
    case ValueKind::kString: return a.str() == b.str();
    case ValueKind::kList: {
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!Equal(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    case ValueKind::kDict: {
      if (a.dict().entries.size() != b.dict().entries.size()) return false;
      for (const auto& [k, v] : a.dict().entries) {
        const Value* other = b.dict().Find(k);
        if (!other || !Equal(v, *other)) return false;
      }
      return true;
    }
    case ValueKind::kNamespace: return &a.dict() == &b.dict();
    case ValueKind::kCallable: return &a.callable() == &b.callable();
    default: return false;
  }
}

bool Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.float_value() < b.float_value();
    return a.int_value() < b.int_value();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equal(x[i], y[i])) return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  Fail(std::string("'<' not supported between instances of '") + TypeName(a) + "' and '" +
       TypeName(b) + "'");
}

const char* TypeName(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return "Undefined";
    case ValueKind::kNone: return "NoneType";
    case ValueKind::kBool: return "bool";
    case ValueKind::kInt: return "int";
    case ValueKind::kFloat: return "float";
    case ValueKind::kString: return "str";
    case ValueKind::kList: return v.is_tuple() ? "tuple" : "list";
    case ValueKind::kDict: return "dict";
    case ValueKind::kNamespace: return "Namespace";
    case ValueKind::kCallable: return "function";
  }
  return "object";
}

std::string Repr(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return "Undefined";
    case ValueKind::kNone: return "None";
    case ValueKind::kBool: return v.bool_value() ? "True" : "False";
    case ValueKind::kInt: return std::to_string(v.int_value());
    case ValueKind::kFloat: return PyFloatRepr(v.float_value());
    case ValueKind::kString: return PyStrRepr(v.str());
    case ValueKind::kList: {
      std::string out = v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += ", ";
        out += Repr(v.items()[i]);
      }
      if (v.is_tuple() && v.items().size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case ValueKind::kDict:
    case ValueKind::kNamespace: {
      std::string out = v.is_namespace() ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, x] : v.dict().entries) {
        if (!first) out += ", ";
        first = false;
        out += Repr(k) + ": " + Repr(x);
      }
      return out + (v.is_namespace() ? "}>" : "}");
    }
    case ValueKind::kCallable: return "<function " + v.callable().name + ">";
  }
  return "";
}

std::string ToPython(const Value& v) {
  if (v.is_undefined()) return "";
  if (v.is_string()) return v.str();
  return Repr(v);
}

std::shared_ptr<const StrData> ToStr(const Value& v) {
  if (v.is_string()) return v.str_ptr();
  auto d = std::make_shared<StrData>();
  d->text = ToPython(v);
  // A container printed whole (e.g. a list of the caller's strings) is caller data.
  if ((v.is_list() || v.is_dict()) && !d->text.empty()) d->input.push_back({0, d->text.size()});
  return d;
}

}  // namespace anymoe::jinja
