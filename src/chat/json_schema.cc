// Compiles the supported JSON Schema subset (json_schema.h) into value nodes.
// Keywords that constrain a value's text (pattern, format, lengths with
// either, numeric ranges, multipleOf) become byte DFAs; allOf is merged at
// the JSON level first (json_schema_merge.h); $ref targets are compiled once
// and shared, so a recursive schema is a cyclic graph. Shortest values (which
// let decoding close the document within its budget) are found afterwards by
// a fixpoint over that graph (json_schema_shortest.cc).
#include "chat/json_schema.h"

#include <algorithm>
#include <map>
#include <set>

#include "chat/json_number_range.h"
#include "chat/json_regex.h"
#include "chat/json_schema_merge.h"
#include "chat/json_schema_shortest.h"
#include "chat/json_string_formats.h"
#include "chat/tool_calls.h"

namespace anymoe {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 32;
constexpr size_t kMaxProperties = 64;
constexpr size_t kMaxPrefixItems = 64;
constexpr int kMaxInlinedRefs = 32;

// A compact JSON text of a literal (enum / const value), as json.dumps with
// separators (",", ":") would write it.
std::string CompactJson(const Json& v) {
  if (!v.is_object() && !v.is_array()) return PythonJsonDumps(v);
  std::string out = v.is_array() ? "[" : "{";
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!first) out += ",";
    first = false;
    if (v.is_object()) out += PythonJsonDumps(Json(it.key())) + ":";
    out += CompactJson(it.value());
  }
  return out + (v.is_array() ? "]" : "}");
}


// Whether a JSON value is of a schema type name.
bool OfType(const Json& v, const std::string& t) {
  if (t == "string") return v.is_string();
  if (t == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == double(int64_t(v.get<double>())));
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  return false;
}

const std::set<std::string>& ObjectKeywords() {
  static const std::set<std::string> k = {"properties", "required", "additionalProperties", "patternProperties",
                                          "propertyNames", "dependentRequired", "minProperties", "maxProperties"};
  return k;
}
const std::set<std::string>& ArrayKeywords() {
  static const std::set<std::string> k = {"items", "prefixItems", "minItems", "maxItems", "uniqueItems",
                                          "additionalItems"};
  return k;
}
const std::set<std::string>& StringKeywords() {
  static const std::set<std::string> k = {"minLength", "maxLength", "pattern", "format"};
  return k;
}
const std::set<std::string>& NumberKeywords() {
  static const std::set<std::string> k = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                          "multipleOf"};
  return k;
}

// Keywords we know and cannot enforce, with the reason.
const std::map<std::string, std::string>& Refused() {
  static const std::map<std::string, std::string> k = {
      {"not", "negation cannot be compiled into the generating automaton"},
      {"if", "conditional schemas are not supported"},
      {"then", "conditional schemas are not supported"},
      {"else", "conditional schemas are not supported"},
      {"contains", "'contains' is not supported"},
      {"minContains", "'contains' is not supported"},
      {"maxContains", "'contains' is not supported"},
      {"dependentSchemas", "dependentSchemas is not supported (dependentRequired is)"},
      {"dependencies", "dependencies is not supported (dependentRequired is)"},
      {"unevaluatedProperties", "unevaluatedProperties is not supported"},
      {"unevaluatedItems", "unevaluatedItems is not supported"},
      {"$dynamicRef", "dynamic references are not supported"},
      {"$recursiveRef", "dynamic references are not supported"},
  };
  return k;
}

class Compiler {
 public:
  Compiler(const Json& root, const SchemaLimits& limits) : root_(root), limits_(limits) {}

  Expected<CompiledSchema> Run() {
    int32_t root;
    RETURN_IF_ERROR(Compile(root_, 0, "", &root));
    out_.root = root;
    for (const auto& [id, path] : one_ofs_) RETURN_IF_ERROR(CheckOneOf(id, path));
    RETURN_IF_ERROR(FinishSchema(&out_, paths_));
    return std::move(out_);
  }

 private:
  int32_t NewNode(SchemaKind kind, const std::string& path) {
    out_.nodes.emplace_back();
    out_.nodes.back().kind = kind;
    paths_.push_back(path);
    return int32_t(out_.nodes.size() - 1);
  }
  SchemaNode& N(int32_t id) { return out_.nodes[size_t(id)]; }

  static Status Error(const std::string& key, const std::string& path, const std::string& why) {
    return Status::Error("keyword '" + key + "' at " + (path.empty() ? "/" : path) + ": " + why);
  }

  Status Compile(const Json& s, int depth, const std::string& path, int32_t* out) {
    if (out_.nodes.size() > limits_.max_nodes) {
      return Error("$defs", path, "the schema needs more than " + std::to_string(limits_.max_nodes) + " nodes");
    }
    if (depth > kMaxDepth) return Error("properties", path, "nested deeper than 32 levels");
    if (s.is_boolean()) {
      if (!s.get<bool>()) return Error("false", path, "the schema false accepts nothing");
      *out = NewNode(SchemaKind::kAnyValue, path);
      return Status::Ok();
    }
    if (!s.is_object()) return Error("type", path, "a schema must be an object or a boolean");
    for (auto it = s.begin(); it != s.end(); ++it) {
      const auto r = Refused().find(it.key());
      if (r != Refused().end()) return Error(it.key(), path, r->second);
    }
    if (s.contains("allOf") || (s.contains("$ref") && HasConstraints(s, "$ref")) ||
        (s.contains("anyOf") && HasConstraints(s, "anyOf")) || (s.contains("oneOf") && HasConstraints(s, "oneOf"))) {
      return AllOf(s, depth, path, out);
    }
    if (s.contains("$ref")) return Ref(s["$ref"], depth, path, out);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const Json& alts = s[key];
      if (!alts.is_array() || alts.empty()) return Error(key, path, "must be a non-empty array");
      std::vector<int32_t> ids;
      for (size_t i = 0; i < alts.size(); ++i) {
        int32_t id;
        RETURN_IF_ERROR(Compile(alts[i], depth + 1, path + "/" + key + "/" + std::to_string(i), &id));
        ids.push_back(id);
      }
      *out = NewNode(SchemaKind::kAnyOf, path);
      N(*out).alternatives = std::move(ids);
      if (std::string(key) == "oneOf") one_ofs_.emplace_back(*out, path);
      return Status::Ok();
    }
    if (s.contains("const") || s.contains("enum")) return Literals(s, path, out);
    if (!s.contains("type")) {
      // Keywords of one type apply to values of that type only; generating
      // that type (the first whose keywords appear) is a subset of the language.
      for (const auto& [keys, type] : {std::pair{&ObjectKeywords(), "object"}, std::pair{&ArrayKeywords(), "array"},
                                       std::pair{&StringKeywords(), "string"}, std::pair{&NumberKeywords(), "number"}}) {
        for (const std::string& k : *keys) {
          if (!s.contains(k)) continue;
          Json typed = s;
          typed["type"] = type;
          return Compile(typed, depth, path, out);
        }
      }
      *out = NewNode(SchemaKind::kAnyValue, path);
      return Status::Ok();
    }
    const Json& type = s["type"];
    if (type.is_array()) {
      if (type.empty()) return Error("type", path, "must not be empty");
      std::vector<int32_t> ids;
      std::set<std::string> seen;
      for (const Json& t : type) {
        if (!t.is_string()) return Error("type", path, "must be a string or a list of strings");
        // integer is a subset of number: generating both would only repeat.
        if (!seen.insert(t.get<std::string>()).second) continue;
        Json single = s;
        single["type"] = t;
        int32_t id;
        RETURN_IF_ERROR(Compile(single, depth + 1, path, &id));
        ids.push_back(id);
      }
      if (ids.size() == 1) {
        *out = ids[0];
        return Status::Ok();
      }
      *out = NewNode(SchemaKind::kAnyOf, path);
      N(*out).alternatives = std::move(ids);
      return Status::Ok();
    }
    if (!type.is_string()) return Error("type", path, "must be a string or a list of strings");
    const std::string t = type.get<std::string>();
    if (t == "object") return Object(s, depth, path, out);
    if (t == "array") return Array(s, depth, path, out);
    if (t == "string") return String(s, path, out);
    if (t == "number" || t == "integer") return Number(s, t == "integer", path, out);
    if (t == "boolean" || t == "null") {
      Json e = Json::object();
      e["enum"] = t == "null" ? Json::array({nullptr}) : Json::array({true, false});
      return Literals(e, path, out);
    }
    return Error("type", path, "type '" + t + "' is not a JSON Schema type");
  }

  // Whether `s` says more than `key` and annotations (then it is an allOf).
  static bool HasConstraints(const Json& s, const char* key) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() != key && !IsSchemaAnnotation(it.key())) return true;
    }
    return false;
  }

  // The schema a local reference names.
  Expected<const Json*> Target(const Json& ref, const std::string& path) {
    if (!ref.is_string()) return Error("$ref", path, "must be a string");
    const std::string r = ref.get<std::string>();
    if (r == "#") return &root_;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (r.compare(0, p.size(), p) != 0) continue;
      const std::string key = p.substr(2, p.size() - 3), name = r.substr(p.size());
      if (root_.is_object() && root_.contains(key) && root_[key].is_object() && root_[key].contains(name)) {
        return &root_[key][name];
      }
    }
    return Error("$ref", path, "'" + r + "' is not '#' or a local #/$defs/ or #/definitions/ entry");
  }

  // Each target is compiled once: a reference met again while its target is
  // still compiling (recursion) gets the node reserved for it, filled in
  // when the target is done.
  Status Ref(const Json& ref, int depth, const std::string& path, int32_t* out) {
    ASSIGN_OR_RETURN(const Json* target, Target(ref, path));
    const std::string r = ref.get<std::string>();
    if (const auto it = refs_.find(r); it != refs_.end()) {
      *out = it->second;
      return Status::Ok();
    }
    const int32_t reserved = NewNode(SchemaKind::kAnyValue, path);
    N(reserved).min_bytes = -1;  // unknown until compiled
    refs_[r] = reserved;
    int32_t compiled;
    RETURN_IF_ERROR(Compile(*target, depth + 1, path + "/$ref(" + r + ")", &compiled));
    if (compiled == reserved) return Error("$ref", path, "'" + r + "' resolves to itself");
    N(reserved) = N(compiled);
    *out = reserved;
    return Status::Ok();
  }

  // allOf, and $ref / anyOf / oneOf next to other keywords (2020-12: all apply).
  Status AllOf(const Json& s, int depth, const std::string& path, int32_t* out) {
    std::vector<Json> parts;
    Json rest = s;
    if (s.contains("allOf")) {
      const Json& all = s["allOf"];
      if (!all.is_array() || all.empty()) return Error("allOf", path, "must be a non-empty array");
      for (const Json& p : all) parts.push_back(p);
      rest.erase("allOf");
    }
    for (const char* key : {"$ref", "anyOf", "oneOf"}) {
      if (!rest.contains(key)) continue;
      parts.push_back(Json{{key, rest[key]}});
      rest.erase(key);
    }
    parts.push_back(rest);
    Json merged = true;
    for (Json& p : parts) {
      // A reference at a part's top is inlined (its own references stay).
      int inlined = 0;
      while (p.is_object() && p.contains("$ref")) {
        if (++inlined > kMaxInlinedRefs) return Error("$ref", path, "references inside allOf loop");
        ASSIGN_OR_RETURN(const Json* target, Target(p["$ref"], path));
        Json other = p;
        other.erase("$ref");
        if (other.empty()) {
          p = *target;
        } else {
          ASSIGN_OR_RETURN(p, MergeSchemas(*target, other, path));
        }
      }
      ASSIGN_OR_RETURN(merged, MergeSchemas(merged, p, path));
    }
    if (merged.is_object() && merged.contains("allOf")) {
      // Still an allOf (MergeSchemas keeps those of nested parts): one more round.
      if (depth + 1 > kMaxDepth) return Error("allOf", path, "nested deeper than 32 levels");
    }
    return Compile(merged, depth + 1, path, out);
  }

  Status Literals(const Json& s, const std::string& path, int32_t* out) {
    for (const std::set<std::string>* keys : {&StringKeywords(), &NumberKeywords()}) {
      for (const std::string& k : *keys) {
        if (s.contains(k)) return Error(k, path, "next to enum / const is not supported");
      }
    }
    std::vector<Json> values;
    if (s.contains("const")) values.push_back(s["const"]);
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) return Error("enum", path, "must be a non-empty array");
      if (e.size() > limits_.max_enum_values) {
        return Error("enum", path, "more than " + std::to_string(limits_.max_enum_values) + " values");
      }
      if (values.empty()) {
        values.assign(e.begin(), e.end());
      } else if (std::find(e.begin(), e.end(), values[0]) == e.end()) {
        return Error("const", path, "the value is not one of 'enum'");
      }
    }
    std::set<std::string> types;
    if (s.contains("type")) {
      if (s["type"].is_string()) types.insert(s["type"].get<std::string>());
      for (const Json& t : s["type"]) {
        if (t.is_string()) types.insert(t.get<std::string>());
      }
    }
    *out = NewNode(SchemaKind::kLiterals, path);
    std::set<std::string> seen;
    size_t bytes = 0;
    for (const Json& v : values) {
      bool typed = types.empty();
      for (const std::string& t : types) typed = typed || OfType(v, t);
      if (!typed) continue;
      std::string text = CompactJson(v);
      bytes += text.size();
      if (bytes > limits_.max_literal_bytes) return Error("enum", path, "the values exceed 1 MiB");
      if (seen.insert(text).second) N(*out).literals.Add(text);
    }
    if (N(*out).literals.strings.empty()) return Error("enum", path, "no value is of the schema's type");
    return Status::Ok();
  }

  // Registers a DFA under the total cap; returns its index.
  Expected<int32_t> AddDfa(ByteDfa dfa, const std::string& key, const std::string& path) {
    dfa_states_ += size_t(dfa.size());
    if (dfa_states_ > limits_.max_total_dfa_states) {
      return Error(key, path, "the schema's automata need more than " + std::to_string(limits_.max_total_dfa_states) +
                                  " states in all");
    }
    out_.dfas.push_back(std::move(dfa));
    return int32_t(out_.dfas.size() - 1);
  }

  Status Count(const Json& s, const char* key, const std::string& path, int64_t* out, int64_t dflt) {
    *out = dflt;
    if (!s.contains(key)) return Status::Ok();
    const Json& v = s[key];
    const bool whole = v.is_number_integer() || (v.is_number_float() && v.get<double>() == double(int64_t(v.get<double>())));
    if (!whole || v.get<double>() < 0 || v.get<double>() > double(int64_t(1) << 20)) {
      return Error(key, path, "must be an integer in [0, 2^20]");
    }
    *out = int64_t(v.get<double>());
    return Status::Ok();
  }

  // The DFA of a string's text under pattern / format / lengths, or none
  // (`*dfa` = -1) when only lengths apply (counted by the automaton itself).
  Status StringDfa(const Json& s, const std::string& path, int32_t* dfa, int64_t* min_length, int64_t* max_length) {
    *dfa = -1;
    RETURN_IF_ERROR(Count(s, "minLength", path, min_length, 0));
    RETURN_IF_ERROR(Count(s, "maxLength", path, max_length, -1));
    if (*max_length >= 0 && *max_length < *min_length) return Error("maxLength", path, "is below minLength");
    std::vector<std::pair<std::string, Expected<ByteDfa>>> parts;
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return Error("pattern", path, "must be a string");
      parts.emplace_back("pattern", CompileRegex(s["pattern"].get<std::string>(), RegexMatch::kSearch,
                                                 limits_.max_dfa_states));
    }
    if (s.contains("format")) {
      if (!s["format"].is_string()) return Error("format", path, "must be a string");
      const std::string re = FormatRegex(s["format"].get<std::string>());
      if (!re.empty()) parts.emplace_back("format", CompileRegex(re, RegexMatch::kWhole, limits_.max_dfa_states));
    }
    if (parts.empty()) return Status::Ok();
    if (*min_length > 0 || *max_length >= 0) {
      parts.emplace_back(*max_length >= 0 ? "maxLength" : "minLength",
                         CodePointRange(*min_length, *max_length, limits_.max_dfa_states));
    }
    Expected<ByteDfa> all = std::move(parts[0].second);
    std::string key = parts[0].first;
    if (!all.ok()) return Error(key, path, all.status().message());
    for (size_t i = 1; i < parts.size(); ++i) {
      if (!parts[i].second.ok()) return Error(parts[i].first, path, parts[i].second.status().message());
      all = Intersect(*all, *parts[i].second, limits_.max_dfa_states);
      if (!all.ok()) return Error(parts[i].first, path, "together with '" + key + "': " + all.status().message());
    }
    ASSIGN_OR_RETURN(*dfa, AddDfa(std::move(*all), key, path));
    *min_length = 0;
    *max_length = -1;
    return Status::Ok();
  }

  Status String(const Json& s, const std::string& path, int32_t* out) {
    int32_t dfa;
    int64_t min_length, max_length;
    RETURN_IF_ERROR(StringDfa(s, path, &dfa, &min_length, &max_length));
    *out = NewNode(SchemaKind::kString, path);
    N(*out).dfa = dfa;
    N(*out).min_length = min_length;
    N(*out).max_length = max_length;
    return Status::Ok();
  }

  Status Number(const Json& s, bool integer, const std::string& path, int32_t* out) {
    NumberBounds b;
    const auto bound = [&](const char* key, std::string* text, bool* exclusive, bool is_exclusive,
                           bool lower) -> Status {
      if (!s.contains(key)) return Status::Ok();
      const Json& v = s[key];
      if (!v.is_number()) return Error(key, path, "must be a number");
      const std::string t = v.is_number_integer() ? std::to_string(v.get<int64_t>()) : DecimalText(v.get<double>());
      if (!text->empty()) {
        // minimum and exclusiveMinimum both: the tighter one.
        const double old = std::stod(*text), now = v.get<double>();
        const bool tighter = lower ? (now > old || (now == old && is_exclusive)) : (now < old || (now == old && is_exclusive));
        if (!tighter) return Status::Ok();
      }
      *text = t;
      *exclusive = is_exclusive;
      return Status::Ok();
    };
    RETURN_IF_ERROR(bound("minimum", &b.minimum, &b.exclusive_minimum, false, true));
    RETURN_IF_ERROR(bound("exclusiveMinimum", &b.minimum, &b.exclusive_minimum, true, true));
    RETURN_IF_ERROR(bound("maximum", &b.maximum, &b.exclusive_maximum, false, false));
    RETURN_IF_ERROR(bound("exclusiveMaximum", &b.maximum, &b.exclusive_maximum, true, false));
    if (s.contains("multipleOf")) {
      const Json& m = s["multipleOf"];
      if (!m.is_number() || m.get<double>() <= 0) return Error("multipleOf", path, "must be a number > 0");
      if (m.get<double>() != double(int64_t(m.get<double>()))) {
        return Error("multipleOf", path, "only whole multiples are supported (" + m.dump() +
                                             " is not whole; Python's float division makes fractional ones inexact)");
      }
      b.multiple_of = int64_t(m.get<double>());
      integer = true;  // whole multiples are integers: generating integers is a subset
    }
    *out = NewNode(integer ? SchemaKind::kInteger : SchemaKind::kNumber, path);
    if (b.minimum.empty() && b.maximum.empty() && b.multiple_of <= 1) return Status::Ok();
    const char* key = !b.minimum.empty() ? (b.exclusive_minimum ? "exclusiveMinimum" : "minimum")
                      : !b.maximum.empty() ? (b.exclusive_maximum ? "exclusiveMaximum" : "maximum")
                                           : "multipleOf";
    Expected<ByteDfa> dfa = integer ? IntegerRangeDfa(b, limits_.max_dfa_states) : NumberRangeDfa(b, limits_.max_dfa_states);
    if (!dfa.ok()) return Error(key, path, dfa.status().message());
    ASSIGN_OR_RETURN(N(*out).dfa, AddDfa(std::move(*dfa), key, path));
    return Status::Ok();
  }

  Status Object(const Json& s, int depth, const std::string& path, int32_t* out);
  Status Map(const Json& s, const Json* key_schema, const Json& value_schema, int depth, const std::string& path,
             int32_t* out);
  Status Array(const Json& s, int depth, const std::string& path, int32_t* out);
  Status CheckOneOf(int32_t id, const std::string& path);

  const Json& root_;
  const SchemaLimits limits_;
  CompiledSchema out_;
  std::vector<std::string> paths_;            // per node: where in the schema
  std::map<std::string, int32_t> refs_;       // $ref -> node
  std::vector<std::pair<int32_t, std::string>> one_ofs_;
  size_t dfa_states_ = 0;
};

Status Compiler::Object(const Json& s, int depth, const std::string& path, int32_t* out) {
  Json props = s.value("properties", Json::object());
  if (!props.is_object()) return Error("properties", path, "must be an object");
  if (props.size() > kMaxProperties) return Error("properties", path, "more than 64 properties");
  const Json additional = s.value("additionalProperties", Json(true));
  if (!additional.is_boolean() && !additional.is_object()) {
    return Error("additionalProperties", path, "must be a boolean or a schema");
  }
  // patternProperties: one pattern governs the keys of a map; a listed
  // property whose name matches also takes the pattern's schema.
  const Json patterns = s.value("patternProperties", Json::object());
  if (!patterns.is_object()) return Error("patternProperties", path, "must be an object");
  for (auto p = patterns.begin(); p != patterns.end(); ++p) {
    auto dfa = CompileRegex(p.key(), RegexMatch::kSearch, limits_.max_dfa_states);
    if (!dfa.ok()) return Error("patternProperties", path, "pattern '" + p.key() + "': " + dfa.status().message());
    for (auto it = props.begin(); it != props.end(); ++it) {
      if (dfa->Matches(it.key())) it.value() = Json{{"allOf", Json::array({it.value(), p.value()})}};
    }
  }
  // Properties outside `properties` take patternProperties or additionalProperties.
  const auto extra_schema = [&](const std::string& name) -> Expected<Json> {
    for (auto p = patterns.begin(); p != patterns.end(); ++p) {
      auto dfa = CompileRegex(p.key(), RegexMatch::kSearch, limits_.max_dfa_states);
      if (dfa.ok() && dfa->Matches(name)) return p.value();
    }
    if (additional == Json(false)) {
      return Error("required", path, "property '" + name + "' is required but additionalProperties is false");
    }
    return additional;
  };
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return Error("required", path, "must be an array");
    for (const Json& r : s["required"]) {
      if (!r.is_string()) return Error("required", path, "must list strings");
      required.insert(r.get<std::string>());
    }
  }
  if (s.contains("dependentRequired")) {
    // A property that needs others: the others are always generated (a
    // subset of the language, so still valid).
    const Json& d = s["dependentRequired"];
    if (!d.is_object()) return Error("dependentRequired", path, "must be an object");
    for (auto it = d.begin(); it != d.end(); ++it) {
      if (!it.value().is_array()) return Error("dependentRequired", path, "must map names to arrays");
      if (!props.contains(it.key()) && !required.count(it.key())) continue;
      for (const Json& r : it.value()) {
        if (!r.is_string()) return Error("dependentRequired", path, "must list strings");
        required.insert(r.get<std::string>());
      }
    }
  }
  for (const std::string& r : required) {
    if (props.contains(r)) continue;
    if (props.size() >= kMaxProperties) return Error("required", path, "more than 64 properties");
    ASSIGN_OR_RETURN(props[r], extra_schema(r));
  }
  if (s.contains("propertyNames")) {
    // Listed names must satisfy it: drop optional ones that do not.
    const Json& names = s["propertyNames"];
    Json typed = names.is_object() ? names : Json::object();
    typed["type"] = "string";
    int32_t dfa;
    int64_t lo, hi;
    RETURN_IF_ERROR(StringDfa(typed, path + "/propertyNames", &dfa, &lo, &hi));
    Json kept = Json::object();
    for (auto it = props.begin(); it != props.end(); ++it) {
      const size_t chars = size_t(std::count_if(it.key().begin(), it.key().end(), [](char c) { return (uint8_t(c) & 0xC0) != 0x80; }));
      bool ok = names != Json(false) && (dfa < 0 ? int64_t(chars) >= lo && (hi < 0 || int64_t(chars) <= hi)
                                                 : out_.dfas[size_t(dfa)].Matches(it.key()));
      if (ok) kept[it.key()] = it.value();
      else if (required.count(it.key())) return Error("propertyNames", path, "the required name '" + it.key() + "' does not satisfy it");
    }
    props = kept;
  }
  int64_t min_props = 0, max_props = -1;
  RETURN_IF_ERROR(Count(s, "minProperties", path, &min_props, 0));
  RETURN_IF_ERROR(Count(s, "maxProperties", path, &max_props, -1));
  if (props.empty()) {
    if (patterns.size() > 1) return Error("patternProperties", path, "more than one pattern on a map is not supported");
    if (min_props > 0) return Error("minProperties", path, "on an object without listed properties is not supported");
    if (max_props >= 0) return Error("maxProperties", path, "on an object without listed properties is not supported");
    if (!patterns.empty()) {
      Json key = Json{{"type", "string"}, {"pattern", patterns.begin().key()}};
      if (s.contains("propertyNames")) key = Json{{"allOf", Json::array({key, s["propertyNames"]})}};
      return Map(s, &key, patterns.begin().value(), depth, path, out);
    }
    if (additional == Json(false)) {
      *out = NewNode(SchemaKind::kObject, path);  // only {}
      return Status::Ok();
    }
    if (additional == Json(true) && !s.contains("propertyNames")) {
      *out = NewNode(SchemaKind::kAnyObject, path);
      return Status::Ok();
    }
    const Json* key = s.contains("propertyNames") ? &s["propertyNames"] : nullptr;
    return Map(s, key, additional, depth, path, out);
  }
  if (int64_t(required.size()) > max_props && max_props >= 0) {
    return Error("maxProperties", path, "is below the number of required properties");
  }
  // min/maxProperties with listed properties: the first optional ones become
  // required, those past the maximum are left out (both subsets of the language).
  std::vector<SchemaProperty> list;
  int64_t optional_room = max_props < 0 ? INT64_MAX : max_props - int64_t(required.size());
  int64_t optional_needed = std::max<int64_t>(0, min_props - int64_t(required.size()));
  for (auto it = props.begin(); it != props.end(); ++it) {
    SchemaProperty p;
    p.key_json = PythonJsonDumps(Json(it.key()));
    p.required = required.count(it.key()) > 0;
    if (!p.required) {
      if (it.value() == Json(false)) continue;  // may not appear
      if (optional_room <= 0) continue;
      --optional_room;
      if (optional_needed > 0) p.required = true, --optional_needed;
    }
    RETURN_IF_ERROR(Compile(it.value(), depth + 1, path + "/properties/" + it.key(), &p.node));
    list.push_back(std::move(p));
  }
  if (optional_needed > 0) return Error("minProperties", path, "is above the number of listed properties");
  *out = NewNode(SchemaKind::kObject, path);
  N(*out).properties = std::move(list);
  for (const SchemaProperty& p : N(*out).properties) N(*out).literals.Add(p.key_json);
  return Status::Ok();
}

Status Compiler::Map(const Json& s, const Json* key_schema, const Json& value_schema, int depth,
                     const std::string& path, int32_t* out) {
  (void)s;
  int32_t key;
  if (key_schema) {
    Json typed = key_schema->is_object() ? *key_schema : Json::object();
    if (*key_schema == Json(false)) return Error("propertyNames", path, "false allows no property, use maxProperties 0");
    if (!typed.contains("allOf")) typed["type"] = "string";
    RETURN_IF_ERROR(Compile(typed, depth + 1, path + "/propertyNames", &key));
    if (N(key).kind != SchemaKind::kString) {
      return Error("propertyNames", path, "must describe strings (type, pattern, format, lengths)");
    }
  } else {
    key = NewNode(SchemaKind::kString, path + "/propertyNames");
  }
  int32_t value;
  RETURN_IF_ERROR(Compile(value_schema, depth + 1, path + "/additionalProperties", &value));
  *out = NewNode(SchemaKind::kMap, path);
  N(*out).key = key;
  N(*out).items = value;
  return Status::Ok();
}

Status Compiler::Array(const Json& s, int depth, const std::string& path, int32_t* out) {
  std::vector<int32_t> prefix;
  Json items = s.value("items", Json(true));
  Json tuple = s.value("prefixItems", Json(nullptr));
  if (items.is_array()) {  // draft 2019 and before: items as a tuple, additionalItems after it
    tuple = items;
    items = s.value("additionalItems", Json(true));
  } else if (s.contains("additionalItems")) {
    return Error("additionalItems", path, "applies only next to an array 'items'");
  }
  if (!tuple.is_null()) {
    if (!tuple.is_array()) return Error("prefixItems", path, "must be an array");
    if (tuple.size() > kMaxPrefixItems) return Error("prefixItems", path, "more than 64 items");
    for (size_t i = 0; i < tuple.size(); ++i) {
      int32_t id;
      RETURN_IF_ERROR(Compile(tuple[i], depth + 1, path + "/prefixItems/" + std::to_string(i), &id));
      prefix.push_back(id);
    }
  }
  int32_t item = -1;
  if (items != Json(false)) RETURN_IF_ERROR(Compile(items, depth + 1, path + "/items", &item));
  *out = NewNode(SchemaKind::kArray, path);
  SchemaNode& n = N(*out);
  n.items = item;
  n.prefix = std::move(prefix);
  RETURN_IF_ERROR(Count(s, "minItems", path, &n.min_items, 0));
  RETURN_IF_ERROR(Count(s, "maxItems", path, &n.max_items, -1));
  if (n.items < 0) {
    const int64_t most = int64_t(n.prefix.size());
    n.max_items = n.max_items < 0 ? most : std::min(n.max_items, most);
    if (n.min_items > most) return Error("minItems", path, "needs more items than prefixItems allows (items is false)");
  }
  if (n.max_items >= 0 && n.max_items < n.min_items) return Error("maxItems", path, "is below minItems");
  if (s.value("uniqueItems", Json(false)) == Json(true) && (n.max_items < 0 || n.max_items > 1)) {
    return Error("uniqueItems", path, "distinct items cannot be enforced by the automaton (only with maxItems <= 1)");
  }
  return Status::Ok();
}

// oneOf is generated as anyOf, which is exact when no value matches two
// alternatives. Disjointness is proved structurally (different JSON types,
// different literals, or objects with a common required property whose
// values are disjoint: a tagged union); otherwise oneOf is refused.
Status Compiler::CheckOneOf(int32_t id, const std::string& path) {
  const std::vector<int32_t> alts = N(id).alternatives;
  for (size_t i = 0; i < alts.size(); ++i) {
    for (size_t j = i + 1; j < alts.size(); ++j) {
      if (!Disjoint(out_, alts[i], alts[j], 0)) {
        return Error("oneOf", path, "alternatives " + std::to_string(i) + " and " + std::to_string(j) +
                                        " may both match, so exactly-one cannot be enforced (use anyOf, or a "
                                        "discriminating const property)");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

int32_t LiteralTrie::Child(int32_t node, uint8_t byte) const {
  if (nodes.empty()) return -1;
  for (const auto& [b, child] : nodes[size_t(node)].edges) {
    if (b == byte) return child;
  }
  return -1;
}

void LiteralTrie::Add(const std::string& s) {
  if (nodes.empty()) nodes.emplace_back();
  const size_t index = strings.size();
  strings.push_back(s);
  const auto mark = [&](int32_t n) {
    Node& x = nodes[size_t(n)];
    if (index < 64) x.leaves |= uint64_t(1) << index;
    x.min_length = std::min(x.min_length, int32_t(s.size()));
  };
  int32_t node = 0;
  mark(0);
  for (size_t i = 0; i < s.size(); ++i) {
    int32_t next = Child(node, uint8_t(s[i]));
    if (next < 0) {
      next = int32_t(nodes.size());
      nodes.emplace_back();
      nodes.back().depth = int32_t(i + 1);
      nodes[size_t(node)].edges.emplace_back(uint8_t(s[i]), next);
    }
    node = next;
    mark(node);
  }
  nodes[size_t(node)].terminal = int32_t(index);
}

Expected<CompiledSchema> CompileJsonSchema(const Json& schema, const SchemaLimits& limits) {
  try {
    return Compiler(schema, limits).Run();
  } catch (const std::exception& e) {
    return Status::Error(std::string("keyword '?' at /: ") + e.what());
  }
}

CompiledSchema AnyJsonObjectSchema() {
  CompiledSchema c;
  c.nodes.emplace_back();
  c.nodes[0].kind = SchemaKind::kAnyObject;
  c.nodes[0].shortest = "{}";
  c.nodes[0].min_bytes = 2;
  c.root = 0;
  return c;
}

}  // namespace anymoe
