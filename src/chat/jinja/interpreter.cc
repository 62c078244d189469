// Walks a parsed template: statements write to an output that keeps caller-data
// ranges; expressions evaluate with Python semantics (builtins.h). Scoping
// follows jinja2: a for-loop iteration and a macro call get their own frame,
// `set` writes the innermost frame (so a `set` inside a loop does not outlive
// its iteration), and `if` opens none. Every node evaluated costs a step.
#include <deque>
#include <unordered_map>

#include "chat/jinja/builtins.h"
#include "chat/jinja/template.h"

namespace anymoe::jinja {
namespace {

struct Frame {
  std::unordered_map<std::string, Value> vars;
  const Frame* parent = nullptr;
  const Value* Find(const std::string& name) const {
    for (const Frame* f = this; f; f = f->parent) {
      auto it = f->vars.find(name);
      if (it != f->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

enum class Flow { kNormal, kBreak, kContinue };

class Interpreter {
 public:
  Interpreter(const RenderOptions& options, Budget* budget)
      : options_(options), budget_(budget) {}

  ~Interpreter() {
    // Macros hold their defining frame; clear frames to break the cycles.
    for (auto& f : frames_) f.vars.clear();
  }

  RenderedText Run(const Body& body, const std::vector<std::pair<std::string, Value>>& variables) {
    Frame& globals = NewFrame(nullptr);
    for (auto& [name, value] : Globals(options_)) globals.vars[name] = value;
    for (const auto& [name, value] : variables) globals.vars[name] = value;
    Frame& top = NewFrame(&globals);
    StrBuilder out;
    const Flow flow = Exec(body, top, out);
    if (flow != Flow::kNormal) Fail("'break' or 'continue' outside a loop", "TemplateSyntaxError");
    StrData d = out.Take();
    return RenderedText{std::move(d.text), std::move(d.input)};
  }

 private:
  Frame& NewFrame(const Frame* parent) {
    ChargeAlloc(sizeof(Frame) + 64);
    frames_.emplace_back();
    frames_.back().parent = parent;
    return frames_.back();
  }

  void Step() {
    if (--budget_->steps_left < 0) {
      Fail("template exceeded its budget of " + std::to_string(options_.limits.max_steps) +
               " evaluation steps",
           "ResourceLimit");
    }
  }

  void Write(StrBuilder& out, const StrData& s) {
    if (out.size() + s.text.size() > options_.limits.max_output_bytes) {
      Fail("template output exceeds " + std::to_string(options_.limits.max_output_bytes) + " bytes",
           "ResourceLimit");
    }
    out.Append(s);
  }

  Flow Exec(const Body& body, Frame& frame, StrBuilder& out) {
    for (const auto& s : body) {
      const Flow flow = ExecOne(*s, frame, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow ExecOne(const Stmt& s, Frame& frame, StrBuilder& out) {
    Step();
    switch (s.kind) {
      case StmtKind::kText: {
        StrData d;
        d.text = s.text;
        Write(out, d);
        return Flow::kNormal;
      }
      case StmtKind::kOutput: {
        const Value v = Eval(*s.expr, frame);
        Write(out, *ToStr(v));
        return Flow::kNormal;
      }
      case StmtKind::kIf:
        for (size_t i = 0; i < s.conditions.size(); ++i) {
          if (Eval(*s.conditions[i], frame).Truthy()) return Exec(s.bodies[i], frame, out);
        }
        return Exec(s.else_body, frame, out);
      case StmtKind::kFor: return ExecFor(s, frame, out);
      case StmtKind::kSet: {
        Value v = Eval(*s.expr, frame);
        if (s.attr_target) {
          const Value ns = Eval(*s.attr_target, frame);
          if (!ns.is_namespace()) Fail("cannot assign attribute on non-namespace object");
          if (!s.attr_name.empty() && s.attr_name[0] == '_') {
            Fail("cannot store underscore-prefixed attributes on a namespace", "SecurityError");
          }
          ns.mutable_namespace().Set(Value::Str(s.attr_name), std::move(v));
        } else {
          Assign(s.targets, v, frame);
        }
        return Flow::kNormal;
      }
      case StmtKind::kSetBlock: {
        StrBuilder captured;
        const Flow flow = Exec(s.body, frame, captured);
        frame.vars[s.targets[0]] = captured.TakeValue();
        return flow;
      }
      case StmtKind::kMacro:
        frame.vars[s.text] = MakeMacro(s, frame);
        return Flow::kNormal;
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
      case StmtKind::kBlock: return Exec(s.body, frame, out);
    }
    return Flow::kNormal;
  }

  void Assign(const std::vector<std::string>& targets, const Value& v, Frame& frame) {
    if (targets.size() == 1) {
      frame.vars[targets[0]] = v;
      return;
    }
    const std::vector<Value> parts = Iterate(v);
    if (parts.size() != targets.size()) {
      Fail("cannot unpack " + std::to_string(parts.size()) + " values into " +
               std::to_string(targets.size()) + " names",
           "ValueError");
    }
    for (size_t i = 0; i < targets.size(); ++i) frame.vars[targets[i]] = parts[i];
  }

  Flow ExecFor(const Stmt& s, Frame& frame, StrBuilder& out) {
    const Value iterable = Eval(*s.expr, frame);
    std::vector<Value> items = Iterate(iterable);
    if (s.filter) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        Step();
        Frame& f = NewFrame(&frame);
        Assign(s.targets, item, f);
        if (Eval(*s.filter, f).Truthy()) kept.push_back(item);
        frames_.pop_back();
      }
      items = std::move(kept);
    }
    if (items.empty()) return Exec(s.else_body, frame, out);
    const int64_t n = int64_t(items.size());
    // One `loop` object per loop, updated in place each iteration.
    auto loop = std::make_shared<DictData>();
    auto index = std::make_shared<int64_t>(0);
    for (const char* k : {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                          "depth", "depth0", "cycle", "previtem", "nextitem"}) {
      loop->entries.emplace_back(Value::Str(k), Value());
    }
    auto& e = loop->entries;
    e[6].second = Value::Int(n);
    e[7].second = Value::Int(1);
    e[8].second = Value::Int(0);
    auto cycle = std::make_shared<Callable>();
    cycle->name = "cycle";
    cycle->fn = [index](const CallArgs& a) -> Value {
      if (a.positional.empty()) Fail("no items for cycling given");
      return a.positional[size_t(*index) % a.positional.size()];
    };
    e[9].second = Value::Function(std::move(cycle));
    const Value loop_value = Value::Dict(loop);
    for (int64_t i = 0; i < n; ++i) {
      Step();
      *index = i;
      e[0].second = Value::Int(i + 1);
      e[1].second = Value::Int(i);
      e[2].second = Value::Int(n - i);
      e[3].second = Value::Int(n - i - 1);
      e[4].second = Value::Bool(i == 0);
      e[5].second = Value::Bool(i == n - 1);
      e[10].second = i > 0 ? items[size_t(i - 1)] : Value::Undefined("previtem");
      e[11].second = i + 1 < n ? items[size_t(i + 1)] : Value::Undefined("nextitem");
      Frame& f = NewFrame(&frame);
      Assign(s.targets, items[size_t(i)], f);
      f.vars["loop"] = loop_value;
      const Flow flow = Exec(s.body, f, out);
      if (!HasMacro(f) && &frames_.back() == &f) frames_.pop_back();
      if (flow == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  static bool HasMacro(const Frame& f) {
    for (const auto& [k, v] : f.vars) {
      if (v.is_callable()) return true;
    }
    return false;
  }

  Value MakeMacro(const Stmt& s, Frame& defining) {
    auto c = std::make_shared<Callable>();
    c->name = s.text;
    const Stmt* stmt = &s;
    Frame* parent = &defining;
    c->fn = [this, stmt, parent](const CallArgs& args) -> Value {
      if (++depth_ > options_.limits.max_call_depth) {
        Fail("macro calls nested deeper than " + std::to_string(options_.limits.max_call_depth) +
                 " (recursion)",
             "ResourceLimit");
      }
      if (args.positional.size() > stmt->params.size()) {
        Fail("macro '" + stmt->text + "' takes not more than " +
             std::to_string(stmt->params.size()) + " argument(s)");
      }
      for (const auto& [k, v] : args.keyword) {
        bool known = false;
        for (const auto& p : stmt->params) known |= p == k;
        if (!known) Fail("macro '" + stmt->text + "' takes no keyword argument '" + k + "'");
      }
      Frame& f = NewFrame(parent);
      for (size_t i = 0; i < stmt->params.size(); ++i) {
        const std::string& p = stmt->params[i];
        if (i < args.positional.size()) {
          f.vars[p] = args.positional[i];
        } else if (const Value* kw = args.Keyword(p)) {
          f.vars[p] = *kw;
        } else if (stmt->defaults[i]) {
          f.vars[p] = Eval(*stmt->defaults[i], f);
        } else {
          f.vars[p] = Value::Undefined(p);
        }
      }
      StrBuilder out;
      Exec(stmt->body, f, out);
      --depth_;
      if (!HasMacro(f) && &frames_.back() == &f) frames_.pop_back();
      return out.TakeValue();
    };
    return Value::Function(std::move(c));
  }

  CallArgs EvalArgs(const Expr& e, size_t first, Frame& frame) {
    CallArgs args;
    const size_t n_keywords = e.keywords.size();
    const size_t n = e.children.size();
    for (size_t i = first; i < n; ++i) {
      Value v = Eval(*e.children[i], frame);
      if (i + n_keywords >= n) {
        args.keyword.emplace_back(e.keywords[i + n_keywords - n], std::move(v));
      } else {
        args.positional.push_back(std::move(v));
      }
    }
    return args;
  }

  Value Eval(const Expr& e, Frame& frame) {
    Step();
    switch (e.kind) {
      case ExprKind::kLiteral: return e.value;
      case ExprKind::kName: {
        const Value* v = frame.Find(e.name);
        return v ? *v : Value::Undefined(e.name);
      }
      case ExprKind::kList:
      case ExprKind::kTuple: {
        std::vector<Value> items;
        for (const auto& c : e.children) items.push_back(Eval(*c, frame));
        ChargeAlloc(items.size() * sizeof(Value));
        return Value::List(std::move(items), e.kind == ExprKind::kTuple);
      }
      case ExprKind::kDict: {
        auto d = std::make_shared<DictData>();
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          Value k = Eval(*e.children[i], frame);
          d->Set(k, Eval(*e.children[i + 1], frame));
        }
        ChargeAlloc(d->entries.size() * 2 * sizeof(Value));
        return Value::Dict(std::move(d));
      }
      case ExprKind::kAttr: return GetAttr(Eval(*e.children[0], frame), e.name);
      case ExprKind::kItem:
        return GetItem(Eval(*e.children[0], frame), Eval(*e.children[1], frame));
      case ExprKind::kSlice: {
        const Value obj = Eval(*e.children[0], frame);
        Value parts[3];
        for (int i = 0; i < 3; ++i) {
          parts[i] = e.children[i + 1] ? Eval(*e.children[i + 1], frame) : Value::None();
        }
        return Slice(obj, parts[0], parts[1], parts[2]);
      }
      case ExprKind::kCall: {
        const Value callee = Eval(*e.children[0], frame);
        const CallArgs args = EvalArgs(e, 1, frame);
        if (callee.is_undefined()) FailUndefined(callee);
        if (!callee.is_callable()) Fail(std::string("'") + TypeName(callee) + "' object is not callable");
        return callee.callable().fn(args);
      }
      case ExprKind::kFilter: {
        const Value input = Eval(*e.children[0], frame);
        return ApplyFilter(e.name, input, EvalArgs(e, 1, frame));
      }
      case ExprKind::kTest: {
        const Value input = Eval(*e.children[0], frame);
        const bool r = ApplyTest(e.name, input, EvalArgs(e, 1, frame));
        return Value::Bool(r != e.negated);
      }
      case ExprKind::kUnary: {
        const Value v = Eval(*e.children[0], frame);
        if (e.name == "not") return Value::Bool(!v.Truthy());
        if (v.is_undefined()) FailUndefined(v);
        if (!v.is_number()) Fail(std::string("bad operand type for unary ") + e.name + ": '" + TypeName(v) + "'");
        if (e.name == "+") return v.is_bool() ? Value::Int(v.int_value()) : v;
        if (v.is_float()) return Value::Float(-v.float_value());
        if (v.int_value() == INT64_MIN) Fail("integer overflow", "OverflowError");
        return Value::Int(-v.int_value());
      }
      case ExprKind::kBinary: {
        if (e.name == "and") {
          Value a = Eval(*e.children[0], frame);
          return a.Truthy() ? Eval(*e.children[1], frame) : a;
        }
        if (e.name == "or") {
          Value a = Eval(*e.children[0], frame);
          return a.Truthy() ? a : Eval(*e.children[1], frame);
        }
        const Value a = Eval(*e.children[0], frame);
        const Value b = Eval(*e.children[1], frame);
        return BinaryOp(e.name, a, b);
      }
      case ExprKind::kCondition: {
        if (Eval(*e.children[0], frame).Truthy()) return Eval(*e.children[1], frame);
        return e.children[2] ? Eval(*e.children[2], frame) : Value::Undefined();
      }
    }
    return Value::Undefined();
  }

  const RenderOptions& options_;
  Budget* budget_;
  std::deque<Frame> frames_;
  int depth_ = 0;
};

// Errors are one line: control characters from the template or the data are escaped.
std::string OneLine(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (static_cast<unsigned char>(c) < 0x20) out += '?';
    else out += c;
  }
  return out;
}

}  // namespace

Expected<Template> Template::Parse(std::string_view source, const ParseLimits& limits) {
  try {
    Template t;
    t.source_ = std::make_shared<const std::string>(source);
    t.body_ = std::make_shared<const Body>(ParseTemplate(*t.source_, LexOptions{}, limits));
    return t;
  } catch (const JinjaError& e) {
    return Status::Error("chat template: " + e.type + ": " + OneLine(e.what()));
  } catch (const std::bad_alloc&) {
    return Status::Error("chat template: out of memory while parsing");
  }
}

Expected<RenderedText> Template::Render(const std::vector<std::pair<std::string, Value>>& variables,
                                        const RenderOptions& options) const {
  Budget budget{options.limits.max_steps, options.limits.max_alloc_bytes, options.limits.max_alloc_bytes};
  SetBudget(&budget);
  try {
    RenderedText r;
    {
      Interpreter interpreter(options, &budget);
      r = interpreter.Run(*body_, variables);
    }
    SetBudget(nullptr);
    return r;
  } catch (const JinjaError& e) {
    SetBudget(nullptr);
    if (e.type == "TemplateError") return Status::Error("chat template raised: " + OneLine(e.what()));
    return Status::Error("chat template: " + e.type + ": " + OneLine(e.what()));
  } catch (const std::bad_alloc&) {
    SetBudget(nullptr);
    return Status::Error("chat template: out of memory while rendering");
  }
}

}  // namespace anymoe::jinja
