// What the interpreter calls on values: attribute and item lookup (with the
// Python methods templates use), slicing, iteration, membership, operators,
// jinja2's filters and tests, the globals transformers defines, and the
// budget every allocation is charged to. Implemented in builtins.cc
// (filters, tests, globals), methods.cc (lookup, methods, operators).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja/template.h"
#include "chat/jinja/value.h"

namespace anymoe::jinja {

// The budget of the render in progress on this thread.
struct Budget {
  int64_t steps_left = 0;
  size_t alloc_left = 0;
  size_t alloc_limit = 0;
};
void SetBudget(Budget* budget);  // null when no render runs
void ChargeAlloc(size_t bytes);  // throws when the budget is exhausted

// Builds strings while keeping the caller-data ranges of their pieces.
class StrBuilder {
 public:
  void Append(const StrData& s);
  void AppendMarkup(std::string_view s);
  size_t size() const { return d_.text.size(); }
  StrData Take() { return std::move(d_); }
  Value TakeValue();

 private:
  StrData d_;
};

// A string computed from `sources`: caller data as a whole if any source holds some.
Value Derived(std::string text, std::initializer_list<const Value*> sources);

Value GetAttr(const Value& obj, std::string_view name);
Value GetItem(const Value& obj, const Value& key);
Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
std::vector<Value> Iterate(const Value& v);
bool Contains(const Value& container, const Value& item);
Value BinaryOp(const std::string& op, const Value& a, const Value& b);
[[noreturn]] void FailUndefined(const Value& v);

Value ApplyFilter(const std::string& name, const Value& input, const CallArgs& args);
bool ApplyTest(const std::string& name, const Value& input, const CallArgs& args);
std::vector<std::pair<std::string, Value>> Globals(const RenderOptions& options);

}  // namespace anymoe::jinja
