// Transitions of the JSON automaton (json_automaton.h). Frames of numbers and
// literals have no closing byte: they end when the next byte does not continue
// them, which is then handed to the parent frame.
#include "chat/json_automaton.h"

#include <algorithm>
#include <cstring>

namespace anymoe {
namespace {

enum Phase : uint8_t {
  kStart = 0,
  // objects (schema and unconstrained)
  kObjOpen, kObjKey, kObjColon, kObjValue, kObjAfter, kObjComma,
  kAnyKey,  // unconstrained object: key string open
  // arrays
  kArrOpen, kArrValue, kArrAfter, kArrComma,
  // strings
  kStrBody, kStrEscape, kStrHex, kStrUtf8,
  // numbers
  kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumE, kNumESign, kNumExp,
  // literals
  kLit,
  // text driven by a DFA (pattern / format / range): frame.a is the DFA state
  kStrDfa, kNumDfa,
};

constexpr int kMaxIntDigits = 15;
constexpr int kMaxFracDigits = 15;
constexpr int kMaxExpDigits = 2;
constexpr int kMaxAnyDepth = 16;

bool IsDigit(uint8_t c) { return c >= '0' && c <= '9'; }
bool IsHex(uint8_t c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

JsonFrame& Top(JsonStack& st) { return st.frames[size_t(st.depth - 1)]; }

// The element at index `i` of an array node (-1: none may come).
int32_t ItemNode(const SchemaNode& n, int64_t i) {
  return i < int64_t(n.prefix.size()) ? n.prefix[size_t(i)] : n.items;
}

}  // namespace

JsonAutomaton::JsonAutomaton(CompiledSchema schema) : schema_(std::move(schema)) {
  const auto add = [&](SchemaKind kind, const char* shortest) {
    schema_.nodes.emplace_back();
    schema_.nodes.back().kind = kind;
    schema_.nodes.back().shortest = shortest;
    schema_.nodes.back().min_bytes = int64_t(std::strlen(shortest));
    return int32_t(schema_.nodes.size() - 1);
  };
  any_string_ = add(SchemaKind::kString, "\"\"");
  any_number_ = add(SchemaKind::kNumber, "0");
  any_value_ = add(SchemaKind::kAnyValue, "0");
  any_literal_ = add(SchemaKind::kLiterals, "true");
  for (const char* lit : {"true", "false", "null"}) schema_.nodes.back().literals.Add(lit);
}

JsonState JsonAutomaton::Start() const {
  JsonState out;
  JsonStack st;
  // Expand the root like a child value (anyOf forks) without feeding a byte.
  std::vector<int32_t> roots = {schema_.root};
  for (size_t i = 0; i < roots.size(); ++i) {
    const SchemaNode& n = node(roots[i]);
    if (n.kind == SchemaKind::kAnyOf) {
      roots.insert(roots.end(), n.alternatives.begin(), n.alternatives.end());
      continue;
    }
    if (n.min_frames > JsonStack::kMaxFrames) continue;
    JsonStack s = st;
    s.depth = 1;
    s.frames[0] = JsonFrame{roots[i], kStart, 0, 0, 0, 0};
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [&](const JsonStack& x, const JsonStack& y) {
    return Key({x}) < Key({y});
  });
  return out;
}

std::string JsonAutomaton::Key(const JsonState& state) const {
  std::string key;
  for (const JsonStack& st : state) {
    key += char(st.done);
    key.append(reinterpret_cast<const char*>(st.frames.data()), size_t(st.depth) * sizeof(JsonFrame));
    key += '|';
  }
  return key;
}

JsonState JsonAutomaton::Advance(const JsonState& state, uint8_t byte) const {
  JsonState out;
  for (const JsonStack& st : state) Step(st, byte, &out);
  if (out.size() > 1) {
    std::vector<std::pair<std::string, size_t>> keys;
    for (size_t i = 0; i < out.size(); ++i) keys.emplace_back(Key({out[i]}), i);
    std::sort(keys.begin(), keys.end());
    JsonState unique;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i == 0 || keys[i].first != keys[i - 1].first) unique.push_back(out[keys[i].second]);
    }
    out.swap(unique);
  }
  return out;
}

// Opens a value of `node` on top of `st` and feeds it `byte` (anyOf: one stack per alternative).
void JsonAutomaton::Push(JsonStack st, int32_t n, bool space, uint8_t byte, JsonState* out) const {
  const SchemaNode& sn = node(n);
  if (sn.kind == SchemaKind::kAnyOf) {
    for (int32_t alt : sn.alternatives) Push(st, alt, space, byte, out);
    return;
  }
  // Open it only if its shortest value still fits the stack, so that every
  // open frame can always be closed (recursive schemas reach the limit).
  if (!Fits(st, n)) return;
  st.frames[size_t(st.depth++)] = JsonFrame{n, kStart, uint8_t(space ? 1 : 0), 0, 0, 0};
  Step(st, byte, out);
}

// The top frame finished its value: pop it, tell the parent, and feed `refeed` if given.
void JsonAutomaton::ChildDone(JsonStack st, JsonState* out, const uint8_t* refeed) const {
  --st.depth;
  if (st.depth == 0) {
    if (refeed) return;  // nothing may follow the document
    st.done = true;
    out->push_back(st);
    return;
  }
  JsonFrame& p = Top(st);
  switch (p.phase) {
    case kObjValue: p.phase = kObjAfter; break;
    case kAnyKey: p.phase = kObjColon; break;
    case kArrValue: {
      const SchemaNode& pn = node(p.node);
      const int64_t cap = pn.kind == SchemaKind::kArray
                              ? std::max({pn.min_items, pn.max_items, int64_t(pn.prefix.size())})
                              : 0;
      p.a = int32_t(std::min<int64_t>(p.a + 1, cap));
      p.phase = kArrAfter;
      break;
    }
    default: return;  // cannot happen
  }
  if (refeed) {
    Step(st, *refeed, out);
  } else {
    out->push_back(st);
  }
}

uint64_t JsonAutomaton::AllowedKeys(const SchemaNode& n, int32_t next, int32_t depth) const {
  uint64_t mask = 0;
  for (size_t i = size_t(next); i < n.properties.size(); ++i) {
    const SchemaProperty& p = n.properties[i];
    // An optional value too deep for the stack is never started (required
    // ones always fit: the object was opened only if its shortest value did).
    if (p.required || depth + node(p.node).min_frames <= JsonStack::kMaxFrames) mask |= uint64_t(1) << i;
    if (p.required) break;
  }
  return mask;
}

void JsonAutomaton::Step(JsonStack st, uint8_t c, JsonState* out) const {
  if (st.done || st.depth == 0) return;
  JsonFrame& f = Top(st);
  const SchemaNode& n = node(f.node);
  const auto emit = [&]() { out->push_back(st); };
  const auto complete_and_pass = [&]() { ChildDone(st, out, &c); };

  if (f.phase == kStart) {
    if ((f.flags & 1) && c == ' ') {
      f.flags = 0;
      return emit();
    }
    f.flags = 0;
    switch (n.kind) {
      case SchemaKind::kObject:
      case SchemaKind::kAnyObject:
      case SchemaKind::kMap:
        if (c != '{') return;
        f.phase = kObjOpen;
        return emit();
      case SchemaKind::kArray:
      case SchemaKind::kAnyArray:
        if (c != '[') return;
        f.phase = kArrOpen;
        return emit();
      case SchemaKind::kString:
        if (c != '"') return;
        f.phase = n.dfa >= 0 ? kStrDfa : kStrBody;
        if (n.dfa >= 0) f.a = schema_.dfas[size_t(n.dfa)].start;
        return emit();
      case SchemaKind::kNumber:
      case SchemaKind::kInteger:
        if (n.dfa >= 0) {
          const ByteDfa& d = schema_.dfas[size_t(n.dfa)];
          const int32_t next = d.Next(d.start, c);
          if (next < 0) return;
          f.phase = kNumDfa;
          f.a = next;
          return emit();
        }
        if (c == '-') f.phase = kNumMinus;
        else if (c == '0') f.phase = kNumZero;
        else if (IsDigit(c)) f.phase = kNumInt, f.aux = 1;
        else return;
        return emit();
      case SchemaKind::kLiterals: {
        const int32_t child = n.literals.Child(0, c);
        if (child < 0) return;
        f.phase = kLit;
        f.a = child;
        return emit();
      }
      case SchemaKind::kAnyValue: {
        int32_t concrete;
        if (c == '{' || c == '[') {
          if (st.depth > kMaxAnyDepth) return;
          // Unconstrained containers reuse this frame's node with their own phases.
          f.phase = c == '{' ? kObjOpen : kArrOpen;
          f.flags = 2;  // bit 1: unconstrained container
          return emit();
        }
        if (c == '"') concrete = any_string_;
        else if (c == '-' || IsDigit(c)) concrete = any_number_;
        else concrete = any_literal_;
        f.node = concrete;
        return Step(st, c, out);
      }
      case SchemaKind::kAnyOf: return;  // expanded by Push
    }
    return;
  }

  // Maps walk like unconstrained objects, with their own key and value nodes.
  const bool unconstrained = n.kind == SchemaKind::kAnyObject || n.kind == SchemaKind::kAnyArray ||
                             n.kind == SchemaKind::kMap || (n.kind == SchemaKind::kAnyValue && (f.flags & 2));
  switch (f.phase) {
    // ---- objects
    case kObjOpen:
    case kObjComma: {
      if (f.phase == kObjComma && (f.flags & 1) && c == ' ') {
        f.flags &= ~1;
        return emit();
      }
      if (c == '}' && f.phase == kObjOpen) {
        if (!unconstrained && (AllowedKeys(n, f.a, st.depth) & ~uint64_t(0)) != 0) {
          // '}' only when no required property is left.
          for (size_t i = size_t(f.a); i < n.properties.size(); ++i) {
            if (n.properties[i].required) return;
          }
        }
        return ChildDone(st, out, nullptr);
      }
      if (c != '"') return;
      if (unconstrained) {
        f.phase = kAnyKey;
        f.flags &= 2;
        return Push(st, n.kind == SchemaKind::kMap ? n.key : any_string_, false, c, out);
      }
      const int32_t child = n.literals.Child(0, c);
      const uint64_t allowed = AllowedKeys(n, f.a, st.depth);
      if (child < 0 || (n.literals.nodes[size_t(child)].leaves & allowed) == 0) return;
      f.phase = kObjKey;
      f.b = child;
      f.flags = 0;
      return emit();
    }
    case kObjKey: {
      const int32_t child = n.literals.Child(f.b, c);
      if (child < 0) return;
      const auto& tn = n.literals.nodes[size_t(child)];
      const uint64_t allowed = AllowedKeys(n, f.a, st.depth);
      if ((tn.leaves & allowed) == 0) return;
      if (tn.terminal >= 0) {  // keys end with '"', so a terminal has no children
        f.b = tn.terminal;
        f.a = tn.terminal + 1;
        f.phase = kObjColon;
      } else {
        f.b = child;
      }
      return emit();
    }
    case kObjColon: {
      if (c != ':') return;
      JsonStack next = st;
      JsonFrame& p = Top(next);
      p.phase = kObjValue;
      const int32_t value_node = n.kind == SchemaKind::kMap ? n.items
                                 : unconstrained          ? any_value_
                                                          : n.properties[size_t(p.b)].node;
      // The value's first byte comes next; open it lazily with room for one space.
      if (!Fits(next, value_node)) return;
      next.frames[size_t(next.depth++)] = JsonFrame{value_node, kStart, 1, 0, 0, 0};
      if (node(value_node).kind == SchemaKind::kAnyOf) {
        // Expand alternatives now so that every stack's top is a concrete value.
        --next.depth;
        std::vector<int32_t> alts = {value_node};
        for (size_t i = 0; i < alts.size(); ++i) {
          const SchemaNode& an = node(alts[i]);
          if (an.kind == SchemaKind::kAnyOf) {
            alts.insert(alts.end(), an.alternatives.begin(), an.alternatives.end());
            continue;
          }
          if (!Fits(next, alts[i])) continue;
          JsonStack s = next;
          s.frames[size_t(s.depth++)] = JsonFrame{alts[i], kStart, 1, 0, 0, 0};
          out->push_back(s);
        }
        return;
      }
      out->push_back(next);
      return;
    }
    case kObjAfter: {
      if (c == '}') {
        if (!unconstrained) {
          for (size_t i = size_t(f.a); i < n.properties.size(); ++i) {
            if (n.properties[i].required) return;
          }
        }
        return ChildDone(st, out, nullptr);
      }
      if (c != ',') return;
      if (!unconstrained && AllowedKeys(n, f.a, st.depth) == 0) return;
      f.phase = kObjComma;
      f.flags |= 1;
      return emit();
    }
    // ---- arrays
    case kArrOpen:
    case kArrComma: {
      if (f.phase == kArrComma && (f.flags & 1) && c == ' ') {
        f.flags &= ~1;
        return emit();
      }
      const int64_t min_items = unconstrained ? 0 : n.min_items;
      const int64_t max_items = unconstrained ? -1 : n.max_items;
      if (c == ']' && f.phase == kArrOpen) {
        if (min_items > 0) return;
        return ChildDone(st, out, nullptr);
      }
      if (max_items >= 0 && f.a >= max_items) return;
      const int32_t item = unconstrained ? any_value_ : ItemNode(n, f.a);
      if (item < 0) return;
      f.phase = kArrValue;
      f.flags &= 2;
      return Push(st, item, false, c, out);
    }
    case kArrAfter: {
      const int64_t min_items = unconstrained ? 0 : n.min_items;
      const int64_t max_items = unconstrained ? -1 : n.max_items;
      if (c == ']') {
        if (f.a < min_items) return;
        return ChildDone(st, out, nullptr);
      }
      if (c != ',' || (max_items >= 0 && f.a >= max_items)) return;
      // A comma only where another item can follow (prefixItems with items false, depth).
      const int32_t item = unconstrained ? any_value_ : ItemNode(n, f.a);
      if (item < 0 || !Fits(st, item)) return;
      f.phase = kArrComma;
      f.flags |= 1;
      return emit();
    }
    // ---- strings
    case kStrBody: {
      const bool limited = n.min_length > 0 || n.max_length >= 0;
      const auto count_char = [&]() {
        if (!limited) return true;
        if (n.max_length >= 0 && f.a + 1 > n.max_length) return false;
        f.a = int32_t(std::min<int64_t>(f.a + 1, std::max(n.min_length, n.max_length)));
        return true;
      };
      if (c == '"') {
        if (f.a < n.min_length) return;
        return ChildDone(st, out, nullptr);
      }
      if (c == '\\') {
        if (n.max_length >= 0 && f.a + 1 > n.max_length) return;
        f.phase = kStrEscape;
        return emit();
      }
      if (c < 0x20) return;
      if (c < 0x80) {
        if (!count_char()) return;
        return emit();
      }
      int pending;
      uint8_t lo = 0x80, hi = 0xBF;
      if (c >= 0xC2 && c <= 0xDF) pending = 1;
      else if (c == 0xE0) pending = 2, lo = 0xA0;
      else if (c >= 0xE1 && c <= 0xEC) pending = 2;
      else if (c == 0xED) pending = 2, hi = 0x9F;
      else if (c >= 0xEE && c <= 0xEF) pending = 2;
      else if (c == 0xF0) pending = 3, lo = 0x90;
      else if (c >= 0xF1 && c <= 0xF3) pending = 3;
      else if (c == 0xF4) pending = 3, hi = 0x8F;
      else return;
      if (n.max_length >= 0 && f.a + 1 > n.max_length) return;
      f.phase = kStrUtf8;
      f.aux = int16_t(pending);
      f.b = lo | (hi << 8);
      return emit();
    }
    case kStrUtf8: {
      const uint8_t lo = uint8_t(f.b & 0xFF), hi = uint8_t(f.b >> 8);
      if (c < lo || c > hi) return;
      f.b = 0x80 | (0xBF << 8);
      if (--f.aux == 0) {
        f.b = 0;
        f.phase = kStrBody;
        if (n.min_length > 0 || n.max_length >= 0) {
          f.a = int32_t(std::min<int64_t>(f.a + 1, std::max(n.min_length, n.max_length)));
        }
      }
      return emit();
    }
    case kStrEscape: {
      if (c == 'u') {
        f.phase = kStrHex;
        f.aux = 0;
        return emit();
      }
      if (!std::strchr("\"\\/bfnrt", c) || c == 0) return;
      f.phase = kStrBody;
      if (n.min_length > 0 || n.max_length >= 0) {
        f.a = int32_t(std::min<int64_t>(f.a + 1, std::max(n.min_length, n.max_length)));
      }
      return emit();
    }
    case kStrHex: {
      if (!IsHex(c)) return;
      if (++f.aux == 4) {
        f.aux = 0;
        f.phase = kStrBody;
        if (n.min_length > 0 || n.max_length >= 0) {
          f.a = int32_t(std::min<int64_t>(f.a + 1, std::max(n.min_length, n.max_length)));
        }
      }
      return emit();
    }
    // ---- numbers
    case kNumMinus:
      if (c == '0') f.phase = kNumZero;
      else if (IsDigit(c)) f.phase = kNumInt, f.aux = 1;
      else return;
      return emit();
    case kNumZero:
    case kNumInt:
      if (IsDigit(c) && f.phase == kNumInt && f.aux < kMaxIntDigits) {
        ++f.aux;
        return emit();
      }
      if (n.kind == SchemaKind::kNumber && c == '.') {
        f.phase = kNumDot;
        f.aux = 0;
        return emit();
      }
      if (n.kind == SchemaKind::kNumber && (c == 'e' || c == 'E')) {
        f.phase = kNumE;
        f.aux = 0;
        return emit();
      }
      return complete_and_pass();
    case kNumDot:
      if (!IsDigit(c)) return;
      f.phase = kNumFrac;
      f.aux = 1;
      return emit();
    case kNumFrac:
      if (IsDigit(c) && f.aux < kMaxFracDigits) {
        ++f.aux;
        return emit();
      }
      if (c == 'e' || c == 'E') {
        f.phase = kNumE;
        f.aux = 0;
        return emit();
      }
      return complete_and_pass();
    case kNumE:
      if (c == '+' || c == '-') f.phase = kNumESign;
      else if (IsDigit(c)) f.phase = kNumExp, f.aux = 1;
      else return;
      return emit();
    case kNumESign:
      if (!IsDigit(c)) return;
      f.phase = kNumExp;
      f.aux = 1;
      return emit();
    case kNumExp:
      if (IsDigit(c) && f.aux < kMaxExpDigits) {
        ++f.aux;
        return emit();
      }
      return complete_and_pass();
    // ---- DFA-driven text
    case kStrDfa: {
      const ByteDfa& d = schema_.dfas[size_t(n.dfa)];
      if (c == '"') {
        if (!d.accepting[size_t(f.a)]) return;
        return ChildDone(st, out, nullptr);
      }
      const int32_t next = d.Next(f.a, c);
      if (next < 0) return;
      f.a = next;
      return emit();
    }
    case kNumDfa: {
      // Number bytes never follow a number in JSON, so a byte the DFA takes
      // continues it and any other byte ends it.
      const ByteDfa& d = schema_.dfas[size_t(n.dfa)];
      const int32_t next = d.Next(f.a, c);
      if (next >= 0) {
        f.a = next;
        return emit();
      }
      if (!d.accepting[size_t(f.a)]) return;
      return complete_and_pass();
    }
    // ---- literals
    case kLit: {
      const int32_t child = n.literals.Child(f.a, c);
      if (child >= 0) {
        f.a = child;
        return emit();
      }
      if (n.literals.nodes[size_t(f.a)].terminal < 0) return;
      return complete_and_pass();
    }
    default: return;
  }
}

int64_t JsonAutomaton::RestAfter(const SchemaNode& n, int32_t prop) const {
  int64_t cost = 1;  // '}'
  for (size_t j = size_t(prop) + 1; j < n.properties.size(); ++j) {
    const SchemaProperty& p = n.properties[j];
    if (p.required) cost += 1 + int64_t(p.key_json.size()) + 1 + node(p.node).min_bytes;
  }
  return cost;
}

// Cheapest way to finish an object whose next key may be any allowed property
// under key-trie node `trie_node` (`depth` bytes of the key typed).
int64_t JsonAutomaton::ObjectKeyCost(const SchemaNode& n, int32_t next, int32_t trie_node, int32_t depth,
                                     int32_t frame_depth) const {
  const uint64_t allowed = AllowedKeys(n, next, frame_depth) & n.literals.nodes[size_t(trie_node)].leaves;
  int64_t best = INT64_MAX;
  for (size_t q = 0; q < n.properties.size(); ++q) {
    if (!(allowed >> q & 1)) continue;
    const SchemaProperty& p = n.properties[q];
    best = std::min(best, int64_t(p.key_json.size()) - depth + 1 + node(p.node).min_bytes +
                              RestAfter(n, int32_t(q)));
  }
  return best;
}

// Bytes that finish an array after `done` items: the missing ones with their
// commas, then ']'.
int64_t JsonAutomaton::ArrayRest(const SchemaNode& n, int64_t done) const {
  int64_t cost = 1;
  const int64_t direct = std::min<int64_t>(n.min_items, int64_t(n.prefix.size()));
  for (int64_t i = done; i < direct; ++i) cost += 1 + node(n.prefix[size_t(i)]).min_bytes;
  const int64_t rest = n.min_items - std::max(done, direct);
  if (rest > 0) cost += rest * (1 + node(n.items).min_bytes);
  return cost;
}

int64_t JsonAutomaton::Closer(const JsonStack& st, int i) const {
  const JsonFrame& f = st.frames[size_t(i)];
  const SchemaNode& n = node(f.node);
  const bool map = n.kind == SchemaKind::kMap;
  const bool unconstrained = n.kind == SchemaKind::kAnyObject || n.kind == SchemaKind::kAnyArray || map ||
                             (n.kind == SchemaKind::kAnyValue && (f.flags & 2));
  const bool array = !unconstrained && n.kind == SchemaKind::kArray;
  // Map entries (unconstrained: "":0) after the key: ':' value '}'.
  const int64_t entry_value = 1 + (map ? node(n.items).min_bytes : 1) + 1;
  const int64_t rest_chars = std::max<int64_t>(0, n.min_length - f.a - 1);
  switch (f.phase) {
    case kStart: return n.kind == SchemaKind::kAnyValue ? 1 : n.min_bytes;
    case kObjOpen:
      if (unconstrained) return 1;
      for (size_t j = size_t(f.a); j < n.properties.size(); ++j) {
        if (n.properties[j].required) return ObjectKeyCost(n, f.a, 0, 0, i + 1);
      }
      return 1;
    case kObjComma:
      return unconstrained ? (map ? node(n.key).min_bytes : 2) + entry_value : ObjectKeyCost(n, f.a, 0, 0, i + 1);
    case kObjKey: return ObjectKeyCost(n, f.a, f.b, n.literals.nodes[size_t(f.b)].depth, i + 1);
    case kAnyKey: return entry_value;
    case kObjColon:
      return unconstrained ? entry_value : 1 + node(n.properties[size_t(f.b)].node).min_bytes + RestAfter(n, f.b);
    case kObjValue:
    case kObjAfter: return unconstrained ? 1 : RestAfter(n, f.a - 1);
    case kArrOpen:
      if (!array) return 1;
      return n.min_items == 0 ? 1 : ArrayRest(n, 0) - 1;  // no comma before the first
    case kArrValue: return array ? ArrayRest(n, f.a + 1) : 1;
    case kArrAfter: return array ? ArrayRest(n, f.a) : 1;
    case kArrComma:
      return array ? node(ItemNode(n, f.a)).min_bytes + ArrayRest(n, f.a + 1) : 2;
    case kStrDfa: return schema_.dfas[size_t(n.dfa)].distance[size_t(f.a)] + 1;
    case kNumDfa: return schema_.dfas[size_t(n.dfa)].distance[size_t(f.a)];
    case kStrBody: return 1 + std::max<int64_t>(0, n.min_length - f.a);
    case kStrEscape: return 2 + rest_chars;
    case kStrHex: return (4 - f.aux) + 1 + rest_chars;
    case kStrUtf8: return f.aux + 1 + rest_chars;
    case kNumMinus:
    case kNumDot:
    case kNumE:
    case kNumESign: return 1;
    case kNumZero:
    case kNumInt:
    case kNumFrac:
    case kNumExp: return 0;
    case kLit: {
      const auto& tn = n.literals.nodes[size_t(f.a)];
      return tn.min_length - tn.depth;
    }
    default: return 0;
  }
}

int64_t JsonAutomaton::ShortestCompletion(const JsonState& state) const {
  int64_t best = INT64_MAX;
  for (const JsonStack& st : state) {
    if (st.done) return 0;
    int64_t total = 0;
    for (int i = 0; i < st.depth; ++i) total += Closer(st, i);
    best = std::min(best, total);
  }
  return best;
}

bool JsonAutomaton::InPlainString(const JsonState& state, std::vector<PlainString>* stacks) const {
  stacks->clear();
  if (state.empty()) return false;
  for (const JsonStack& st : state) {
    if (st.done || st.depth == 0) return false;
    const JsonFrame& f = st.frames[size_t(st.depth - 1)];
    if (f.phase != kStrBody) return false;
    const SchemaNode& n = node(f.node);
    int64_t completion = 0;
    for (int i = 0; i < st.depth; ++i) completion += Closer(st, i);
    stacks->push_back({n.max_length < 0 ? -1 : n.max_length - f.a,
                       std::max<int64_t>(0, n.min_length - f.a), completion});
  }
  return true;
}

}  // namespace anymoe
