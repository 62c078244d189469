// The values a Jinja template computes with, modelled on the Python objects that
// jinja2 sees when transformers renders a chat template: None, bool, int, float,
// str, list/tuple, dict (insertion-ordered), namespace, callables and jinja2's
// Undefined. Strings remember which of their bytes came from the caller's data
// (message text, tools) so that a rendered prompt knows where special tokens
// may not be parsed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/added_tokens.h"

namespace anymoe::jinja {

// Raised inside the engine and turned into a Status at the public boundary.
// `python_type` names the Python exception jinja2 would raise (TypeError,
// UndefinedError, TemplateError for raise_exception, ...).
struct JinjaError : std::runtime_error {
  JinjaError(std::string python_type, const std::string& message)
      : std::runtime_error(message), type(std::move(python_type)) {}
  std::string type;
};
[[noreturn]] void Fail(const std::string& message, const char* python_type = "TypeError");

// Bytes of a string and the ranges of them that came from the caller's data.
struct StrData {
  std::string text;
  std::vector<TextRange> input;  // sorted, disjoint, non-empty
};

class Value;
struct DictData;
struct ListData;
struct Callable;

enum class ValueKind : uint8_t {
  kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable
};

class Value {
 public:
  Value() = default;  // Undefined
  static Value Undefined(std::string name = {});
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value Str(std::string s);             // template text: markup
  static Value InputStr(std::string s);        // the caller's data: plain text
  static Value Str(std::shared_ptr<const StrData> s);
  static Value List(std::vector<Value> items, bool tuple = false);
  static Value Dict(std::shared_ptr<DictData> d);
  static Value Namespace(std::shared_ptr<DictData> d);
  static Value Function(std::shared_ptr<Callable> c);

  ValueKind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == ValueKind::kUndefined; }
  bool is_none() const { return kind_ == ValueKind::kNone; }
  bool is_bool() const { return kind_ == ValueKind::kBool; }
  bool is_int() const { return kind_ == ValueKind::kInt; }
  bool is_float() const { return kind_ == ValueKind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == ValueKind::kString; }
  bool is_list() const { return kind_ == ValueKind::kList; }
  bool is_dict() const { return kind_ == ValueKind::kDict; }
  bool is_namespace() const { return kind_ == ValueKind::kNamespace; }
  bool is_callable() const { return kind_ == ValueKind::kCallable; }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return i_; }  // bools read as 0/1
  double float_value() const { return is_float() ? f_ : double(i_); }
  const std::string& str() const;            // string text
  const StrData& str_data() const { return *s_; }
  const std::shared_ptr<const StrData>& str_ptr() const { return s_; }
  const std::vector<Value>& items() const;   // list/tuple
  bool is_tuple() const;
  const DictData& dict() const;               // dict or namespace
  DictData& mutable_namespace() const;
  const Callable& callable() const { return *c_; }
  const std::string& undefined_name() const { return undefined_name_; }

  // Python truthiness (Undefined is false).
  bool Truthy() const;

 private:
  ValueKind kind_ = ValueKind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const StrData> s_;
  std::shared_ptr<ListData> l_;
  std::shared_ptr<DictData> d_;
  std::shared_ptr<Callable> c_;
  std::string undefined_name_;
};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
};

// Insertion-ordered mapping with string or scalar keys (Python dict).
struct DictData {
  std::vector<std::pair<Value, Value>> entries;
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  void Set(const Value& key, Value value);
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* Keyword(std::string_view name) const;
  // Argument `index` or keyword `name`, else Undefined.
  Value Get(size_t index, std::string_view name) const;
};

struct Callable {
  std::string name;
  std::function<Value(const CallArgs&)> fn;
};

// Python equality (1 == 1.0 == True; Undefined equals only Undefined).
bool Equal(const Value& a, const Value& b);
// Python ordering for sort and <, >; throws TypeError for mixed kinds.
bool Less(const Value& a, const Value& b);
// str(v) as jinja2 prints it: Undefined -> "", None -> "None", True -> "True",
// containers as Python's repr.
std::string ToPython(const Value& v);
// repr(v).
std::string Repr(const Value& v);
// str(v) keeping the caller-data ranges of strings.
std::shared_ptr<const StrData> ToStr(const Value& v);
// Python type name for error messages ("str", "dict", ...).
const char* TypeName(const Value& v);

}  // namespace anymoe::jinja
