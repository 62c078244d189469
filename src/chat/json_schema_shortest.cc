// Shortest values, nesting and disjointness over the schema graph
// (json_schema_shortest.h).
#include "chat/json_schema_shortest.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace anymoe {
namespace {

constexpr int64_t kUnknown = -1;
constexpr int64_t kMaxShortestBytes = int64_t(1) << 20;

Status Refuse(const std::string& key, const std::string& path, const std::string& why) {
  return Status::Error("keyword '" + key + "' at " + (path.empty() ? "/" : path) + ": " + why);
}

int32_t ItemNode(const SchemaNode& n, int64_t i) {
  return i < int64_t(n.prefix.size()) ? n.prefix[size_t(i)] : n.items;
}

// min_bytes from the children's current values (kUnknown when a needed child is).
int64_t Bytes(const CompiledSchema& s, const SchemaNode& n) {
  const auto child = [&](int32_t id) { return s.nodes[size_t(id)].min_bytes; };
  switch (n.kind) {
    case SchemaKind::kObject: {
      int64_t total = 2, count = 0;
      for (const SchemaProperty& p : n.properties) {
        if (!p.required) continue;
        if (child(p.node) < 0) return kUnknown;
        total += (count++ ? 1 : 0) + int64_t(p.key_json.size()) + 1 + child(p.node);
      }
      return total;
    }
    case SchemaKind::kArray: {
      int64_t total = 2;
      const int64_t direct = std::min<int64_t>(n.min_items, int64_t(n.prefix.size()));
      for (int64_t i = 0; i < direct; ++i) {
        if (child(n.prefix[size_t(i)]) < 0) return kUnknown;
        total += (i ? 1 : 0) + child(n.prefix[size_t(i)]);
      }
      const int64_t rest = n.min_items - direct;
      if (rest > 0) {
        if (n.items < 0 || child(n.items) < 0) return kUnknown;
        total += rest * (child(n.items) + 1) - (direct == 0 ? 1 : 0);
      }
      return total;
    }
    case SchemaKind::kString:
      return 2 + (n.dfa >= 0 ? int64_t(s.dfas[size_t(n.dfa)].shortest.size()) : n.min_length);
    case SchemaKind::kNumber:
    case SchemaKind::kInteger: return n.dfa >= 0 ? int64_t(s.dfas[size_t(n.dfa)].shortest.size()) : 1;
    case SchemaKind::kAnyValue: return 1;
    case SchemaKind::kAnyObject:
    case SchemaKind::kAnyArray:
    case SchemaKind::kMap: return 2;
    case SchemaKind::kLiterals: {
      int64_t best = INT64_MAX;
      for (const std::string& t : n.literals.strings) best = std::min<int64_t>(best, int64_t(t.size()));
      return best;
    }
    case SchemaKind::kAnyOf: {
      int64_t best = kUnknown;
      for (int32_t a : n.alternatives) {
        if (child(a) >= 0 && (best < 0 || child(a) < best)) best = child(a);
      }
      return best;
    }
  }
  return kUnknown;
}

// The shortest value and its nesting, following the children min_bytes chose.
// Children have strictly fewer bytes (anyOf: equal, but unions are acyclic).
void Build(CompiledSchema* s, int32_t id, std::vector<uint8_t>* built) {
  if ((*built)[size_t(id)]) return;
  (*built)[size_t(id)] = 1;
  SchemaNode& n = s->nodes[size_t(id)];
  const auto sub = [&](int32_t c) -> const SchemaNode& {
    Build(s, c, built);
    return s->nodes[size_t(c)];
  };
  std::string v;
  int32_t frames = 1;
  switch (n.kind) {
    case SchemaKind::kObject: {
      v = "{";
      for (const SchemaProperty& p : n.properties) {
        if (!p.required) continue;
        const SchemaNode& c = sub(p.node);
        if (v.size() > 1) v += ",";
        v += p.key_json + ":" + c.shortest;
        frames = std::max(frames, 1 + c.min_frames);
      }
      v += "}";
      break;
    }
    case SchemaKind::kArray: {
      v = "[";
      for (int64_t i = 0; i < n.min_items; ++i) {
        const SchemaNode& c = sub(ItemNode(n, i));
        if (i) v += ",";
        v += c.shortest;
        frames = std::max(frames, 1 + c.min_frames);
      }
      v += "]";
      break;
    }
    case SchemaKind::kString:
      v = "\"" + (n.dfa >= 0 ? s->dfas[size_t(n.dfa)].shortest : std::string(size_t(n.min_length), 'a')) + "\"";
      break;
    case SchemaKind::kNumber:
    case SchemaKind::kInteger: v = n.dfa >= 0 ? s->dfas[size_t(n.dfa)].shortest : "0"; break;
    case SchemaKind::kAnyValue: v = "0"; break;
    case SchemaKind::kAnyObject:
    case SchemaKind::kMap: v = "{}"; break;
    case SchemaKind::kAnyArray: v = "[]"; break;
    case SchemaKind::kLiterals:
      v = n.literals.strings[0];
      for (const std::string& t : n.literals.strings) {
        if (t.size() < v.size()) v = t;
      }
      break;
    case SchemaKind::kAnyOf:
      for (int32_t a : n.alternatives) {
        if (s->nodes[size_t(a)].min_bytes == n.min_bytes) {
          const SchemaNode& c = sub(a);
          v = c.shortest;
          frames = c.min_frames;
          break;
        }
      }
      break;
  }
  SchemaNode& m = s->nodes[size_t(id)];  // `sub` may not move nodes, but be explicit
  m.shortest = std::move(v);
  m.min_frames = frames;
}

// Whether following union alternatives from `id` comes back to it.
bool UnionCycle(const CompiledSchema& s, int32_t id, std::vector<uint8_t>* color) {
  uint8_t& c = (*color)[size_t(id)];
  if (c == 1) return true;
  if (c == 2) return false;
  c = 1;
  const SchemaNode& n = s.nodes[size_t(id)];
  if (n.kind == SchemaKind::kAnyOf) {
    for (int32_t a : n.alternatives) {
      if (UnionCycle(s, a, color)) return true;
    }
  }
  (*color)[size_t(id)] = 2;
  return false;
}

char Category(SchemaKind k) {
  switch (k) {
    case SchemaKind::kObject:
    case SchemaKind::kMap:
    case SchemaKind::kAnyObject: return 'o';
    case SchemaKind::kArray:
    case SchemaKind::kAnyArray: return 'a';
    case SchemaKind::kString: return 's';
    case SchemaKind::kNumber:
    case SchemaKind::kInteger: return 'n';
    default: return '*';
  }
}

char LiteralCategory(const std::string& text) {
  switch (text[0]) {
    case '"': return 's';
    case '{': return 'o';
    case '[': return 'a';
    case 't':
    case 'f': return 'b';
    case 'n': return 'z';
    default: return 'n';
  }
}

void Leaves(const CompiledSchema& s, int32_t id, std::vector<int32_t>* out, int budget) {
  const SchemaNode& n = s.nodes[size_t(id)];
  if (n.kind != SchemaKind::kAnyOf || budget <= 0) {
    out->push_back(id);
    return;
  }
  for (int32_t a : n.alternatives) Leaves(s, a, out, budget - 1);
}

bool LiteralDisjoint(const CompiledSchema& s, const std::string& text, const SchemaNode& other) {
  const char c = LiteralCategory(text);
  if (other.kind == SchemaKind::kLiterals) {
    for (const std::string& t : other.literals.strings) {
      if (LiteralCategory(t) != c) continue;
      if (t == text) return false;
      if (c == 'n' && nlohmann::json::parse(t) == nlohmann::json::parse(text)) return false;
      if (c == 'o' || c == 'a') return false;  // equal values may be spelled apart
    }
    return true;
  }
  const char k = Category(other.kind);
  if (k == '*') return false;
  if (k != c && !(k == 'n' && c == 'n')) return true;
  if (other.kind == SchemaKind::kString && other.dfa >= 0) {
    return !s.dfas[size_t(other.dfa)].Matches(nlohmann::json::parse(text).get<std::string>());
  }
  return false;
}

bool LeafDisjoint(const CompiledSchema& s, int32_t a, int32_t b, int depth) {
  const SchemaNode& x = s.nodes[size_t(a)];
  const SchemaNode& y = s.nodes[size_t(b)];
  if (x.kind == SchemaKind::kLiterals || y.kind == SchemaKind::kLiterals) {
    const SchemaNode& lit = x.kind == SchemaKind::kLiterals ? x : y;
    const SchemaNode& other = x.kind == SchemaKind::kLiterals ? y : x;
    for (const std::string& t : lit.literals.strings) {
      if (!LiteralDisjoint(s, t, other)) return false;
    }
    return true;
  }
  const char cx = Category(x.kind), cy = Category(y.kind);
  if (cx == '*' || cy == '*') return false;
  if (cx != cy) return true;
  if (x.kind == SchemaKind::kObject && y.kind == SchemaKind::kObject && depth < 4) {
    for (const SchemaProperty& p : x.properties) {
      if (!p.required) continue;
      for (const SchemaProperty& q : y.properties) {
        if (q.required && q.key_json == p.key_json && Disjoint(s, p.node, q.node, depth + 1)) return true;
      }
    }
  }
  return false;
}

}  // namespace

bool Disjoint(const CompiledSchema& s, int32_t a, int32_t b, int depth) {
  std::vector<int32_t> la, lb;
  Leaves(s, a, &la, 8);
  Leaves(s, b, &lb, 8);
  for (int32_t x : la) {
    for (int32_t y : lb) {
      if (!LeafDisjoint(s, x, y, depth)) return false;
    }
  }
  return true;
}

Status FinishSchema(CompiledSchema* s, const std::vector<std::string>& paths) {
  const size_t count = s->nodes.size();
  std::vector<uint8_t> color(count, 0);
  for (size_t i = 0; i < count; ++i) {
    if (UnionCycle(*s, int32_t(i), &color)) {
      return Refuse("$ref", paths[i], "a union that contains itself with no object or array between");
    }
  }
  for (SchemaNode& n : s->nodes) n.min_bytes = kUnknown;
  // Bellman-Ford style: each pass can only lower or fill in values; a pass
  // without change is the fixpoint (at most one pass per node plus one).
  for (size_t pass = 0; pass <= count + 1; ++pass) {
    bool changed = false;
    for (SchemaNode& n : s->nodes) {
      const int64_t b = Bytes(*s, n);
      if (b != n.min_bytes && (n.min_bytes < 0 || (b >= 0 && b < n.min_bytes))) {
        n.min_bytes = b;
        changed = true;
      }
    }
    if (!changed) break;
  }
  for (size_t i = 0; i < count; ++i) {
    if (s->nodes[i].min_bytes < 0) {
      return Refuse("$ref", paths[i], "the recursion has no finite value (every branch recurses again)");
    }
    if (s->nodes[i].min_bytes > kMaxShortestBytes) {
      return Refuse("minItems", paths[i], "the shortest valid value is over 1 MiB");
    }
  }
  std::vector<uint8_t> built(count, 0);
  for (size_t i = 0; i < count; ++i) Build(s, int32_t(i), &built);
  if (s->nodes[size_t(s->root)].min_frames > kMaxJsonNesting) {
    return Refuse("properties", paths[size_t(s->root)],
                  "every valid value nests deeper than " + std::to_string(kMaxJsonNesting) + " levels");
  }
  return Status::Ok();
}

}  // namespace anymoe
