// Compiles the supported JSON Schema subset (json_schema.h) into value nodes,
// each with its shortest valid value, which constrained decoding uses to close
// the document within the token budget.
#include "chat/json_schema.h"

#include <algorithm>
#include <set>

#include "chat/tool_calls.h"

namespace anymoe {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 32;
constexpr size_t kMaxNodes = 4096;
constexpr size_t kMaxProperties = 64;

const std::set<std::string>& Annotations() {
  static const std::set<std::string> kSet = {"title", "description", "default", "examples",
                                             "$schema", "$id", "$comment", "strict",
                                             "$defs", "definitions", "name"};
  return kSet;
}

// A compact JSON text of a literal (enum / const value), as json.dumps with
// separators (",", ":") would write it.
std::string CompactJson(const Json& v) {
  std::string s = PythonJsonDumps(v);
  // PythonJsonDumps uses ", " and ": "; re-dump compactly through nlohmann
  // while keeping Python's spelling of floats and non-ASCII text.
  if (!v.is_object() && !v.is_array()) return s;
  std::string out;
  if (v.is_array()) {
    out = "[";
    bool first = true;
    for (const Json& x : v) {
      if (!first) out += ",";
      first = false;
      out += CompactJson(x);
    }
    return out + "]";
  }
  out = "{";
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!first) out += ",";
    first = false;
    out += PythonJsonDumps(Json(it.key())) + ":" + CompactJson(it.value());
  }
  return out + "}";
}

class Compiler {
 public:
  explicit Compiler(const Json& root) : root_(root) {}

  Expected<CompiledSchema> Run() {
    int32_t root;
    Status st = Compile(root_, 0, "", &root);
    if (!st.ok()) return st;
    out_.root = root;
    return std::move(out_);
  }

 private:
  int32_t NewNode(SchemaKind kind) {
    out_.nodes.emplace_back();
    out_.nodes.back().kind = kind;
    return int32_t(out_.nodes.size() - 1);
  }

  Status Error(const std::string& path, const std::string& what) {
    return Status::Error("json_schema" + (path.empty() ? std::string() : " at " + path) + ": " + what);
  }

  Status Compile(const Json& s, int depth, const std::string& path, int32_t* out) {
    if (out_.nodes.size() > kMaxNodes) return Error(path, "schema too large");
    if (depth > kMaxDepth) return Error(path, "nested deeper than 32 levels");
    if (s.is_boolean()) {
      if (!s.get<bool>()) return Error(path, "the schema 'false' accepts nothing");
      *out = NewNode(SchemaKind::kAnyValue);
      return Finish(*out);
    }
    if (!s.is_object()) return Error(path, "a schema must be an object");
    if (s.contains("$ref")) return Ref(s, depth, path, out);
    static const std::set<std::string> kKnown = {
        "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
        "minLength", "maxLength", "enum", "const", "anyOf"};
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (!kKnown.count(it.key()) && !Annotations().count(it.key())) {
        return Error(path, "keyword '" + it.key() + "' is not supported");
      }
    }
    if (s.contains("const") || s.contains("enum")) return Literals(s, path, out);
    if (s.contains("anyOf")) {
      const Json& alts = s["anyOf"];
      if (!alts.is_array() || alts.empty()) return Error(path, "'anyOf' must be a non-empty array");
      if (s.contains("type") || s.contains("properties") || s.contains("items")) {
        return Error(path, "'anyOf' next to type/properties/items is not supported");
      }
      std::vector<int32_t> ids;
      for (size_t i = 0; i < alts.size(); ++i) {
        int32_t id;
        RETURN_IF_ERROR(Compile(alts[i], depth + 1, path + "/anyOf/" + std::to_string(i), &id));
        ids.push_back(id);
      }
      *out = NewNode(SchemaKind::kAnyOf);
      out_.nodes[size_t(*out)].alternatives = std::move(ids);
      return Finish(*out);
    }
    if (!s.contains("type")) {
      if (s.contains("properties")) return Object(s, depth, path, out);
      if (s.contains("items")) return Array(s, depth, path, out);
      *out = NewNode(SchemaKind::kAnyValue);
      return Finish(*out);
    }
    const Json& type = s["type"];
    if (type.is_array()) {
      if (type.empty()) return Error(path, "'type' must not be empty");
      std::vector<int32_t> ids;
      for (const Json& t : type) {
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
      *out = NewNode(SchemaKind::kAnyOf);
      out_.nodes[size_t(*out)].alternatives = std::move(ids);
      return Finish(*out);
    }
    if (!type.is_string()) return Error(path, "'type' must be a string or a list of strings");
    const std::string t = type.get<std::string>();
    if (t == "object") return Object(s, depth, path, out);
    if (t == "array") return Array(s, depth, path, out);
    if (t == "string") {
      *out = NewNode(SchemaKind::kString);
      SchemaNode& n = out_.nodes[size_t(*out)];
      RETURN_IF_ERROR(Count(s, "minLength", path, &n.min_length, 0));
      RETURN_IF_ERROR(Count(s, "maxLength", path, &n.max_length, -1));
      if (n.max_length >= 0 && n.max_length < n.min_length) return Error(path, "maxLength < minLength");
      return Finish(*out);
    }
    if (t == "number" || t == "integer") {
      *out = NewNode(t == "number" ? SchemaKind::kNumber : SchemaKind::kInteger);
      return Finish(*out);
    }
    if (t == "boolean" || t == "null") {
      Json lits = t == "null" ? Json::array({nullptr}) : Json::array({true, false});
      Json e = Json::object();
      e["enum"] = lits;
      return Literals(e, path, out);
    }
    return Error(path, "type '" + t + "' is not supported");
  }

  Status Count(const Json& s, const char* key, const std::string& path, int64_t* out, int64_t dflt) {
    *out = dflt;
    if (!s.contains(key)) return Status::Ok();
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t(1) << 20)) {
      return Error(path, std::string("'") + key + "' must be an integer in [0, 2^20]");
    }
    *out = v.get<int64_t>();
    return Status::Ok();
  }

  Status Ref(const Json& s, int depth, const std::string& path, int32_t* out) {
    if (s.size() != 1 && !(s.size() == 2 && s.contains("description"))) {
      return Error(path, "'$ref' next to other keywords is not supported");
    }
    const Json& ref = s["$ref"];
    if (!ref.is_string()) return Error(path, "'$ref' must be a string");
    const std::string r = ref.get<std::string>();
    std::string name;
    const Json* table = nullptr;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (r.compare(0, p.size(), p) == 0) {
        name = r.substr(p.size());
        const std::string key = p.substr(2, p.size() - 3);
        if (root_.is_object() && root_.contains(key)) table = &root_[key];
      }
    }
    if (!table || !table->is_object() || !table->contains(name)) {
      return Error(path, "'$ref' '" + r + "' is not a local #/$defs/ or #/definitions/ entry");
    }
    if (std::find(ref_stack_.begin(), ref_stack_.end(), r) != ref_stack_.end()) {
      return Error(path, "recursive '$ref' '" + r + "' is not supported");
    }
    ref_stack_.push_back(r);
    Status st = Compile((*table)[name], depth + 1, path + "/" + name, out);
    ref_stack_.pop_back();
    return st;
  }

  Status Literals(const Json& s, const std::string& path, int32_t* out) {
    std::vector<std::string> texts;
    if (s.contains("const")) texts.push_back(CompactJson(s["const"]));
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) return Error(path, "'enum' must be a non-empty array");
      std::vector<std::string> values;
      for (const Json& v : e) values.push_back(CompactJson(v));
      if (!texts.empty()) {
        if (std::find(values.begin(), values.end(), texts[0]) == values.end()) {
          return Error(path, "'const' is not one of 'enum'");
        }
      } else {
        texts = values;
      }
    }
    *out = NewNode(SchemaKind::kLiterals);
    SchemaNode& n = out_.nodes[size_t(*out)];
    for (const std::string& t : texts) {
      if (std::find(n.literals.strings.begin(), n.literals.strings.end(), t) == n.literals.strings.end()) {
        n.literals.Add(t);
      }
    }
    return Finish(*out);
  }

  Status Object(const Json& s, int depth, const std::string& path, int32_t* out) {
    const Json props = s.value("properties", Json::object());
    if (!props.is_object()) return Error(path, "'properties' must be an object");
    if (props.size() > kMaxProperties) return Error(path, "more than 64 properties");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Error(path, "'required' must be an array");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) return Error(path, "'required' must list strings");
        if (!props.contains(r.get<std::string>())) {
          return Error(path, "required property '" + r.get<std::string>() + "' has no schema in 'properties'");
        }
        required.insert(r.get<std::string>());
      }
    }
    if (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean() &&
        !s["additionalProperties"].is_object()) {
      return Error(path, "'additionalProperties' must be a boolean or a schema");
    }
    if (props.empty() && !s.contains("properties") && !s.contains("required")) {
      *out = NewNode(SchemaKind::kAnyObject);
      return Finish(*out);
    }
    std::vector<SchemaProperty> list;
    for (auto it = props.begin(); it != props.end(); ++it) {
      SchemaProperty p;
      p.key_json = PythonJsonDumps(Json(it.key()));
      p.required = required.count(it.key()) > 0;
      RETURN_IF_ERROR(Compile(it.value(), depth + 1, path + "/properties/" + it.key(), &p.node));
      list.push_back(std::move(p));
    }
    *out = NewNode(SchemaKind::kObject);
    SchemaNode& n = out_.nodes[size_t(*out)];
    n.properties = std::move(list);
    for (const SchemaProperty& p : n.properties) n.literals.Add(p.key_json);
    return Finish(*out);
  }

  Status Array(const Json& s, int depth, const std::string& path, int32_t* out) {
    int32_t items = -1;
    if (s.contains("items")) {
      RETURN_IF_ERROR(Compile(s["items"], depth + 1, path + "/items", &items));
    } else {
      items = NewNode(SchemaKind::kAnyValue);
      RETURN_IF_ERROR(Finish(items));
    }
    *out = NewNode(SchemaKind::kArray);
    SchemaNode& n = out_.nodes[size_t(*out)];
    n.items = items;
    RETURN_IF_ERROR(Count(s, "minItems", path, &n.min_items, 0));
    RETURN_IF_ERROR(Count(s, "maxItems", path, &n.max_items, -1));
    if (n.max_items >= 0 && n.max_items < n.min_items) return Error(path, "maxItems < minItems");
    return Finish(*out);
  }

  // The node's shortest valid value (its children are finished already).
  Status Finish(int32_t id) {
    SchemaNode& n = out_.nodes[size_t(id)];
    switch (n.kind) {
      case SchemaKind::kObject: {
        std::string v = "{";
        bool first = true;
        for (const SchemaProperty& p : n.properties) {
          if (!p.required) continue;
          if (!first) v += ",";
          first = false;
          v += p.key_json + ":" + out_.nodes[size_t(p.node)].shortest;
        }
        n.shortest = v + "}";
        break;
      }
      case SchemaKind::kArray: {
        std::string v = "[";
        for (int64_t i = 0; i < n.min_items; ++i) {
          if (i) v += ",";
          v += out_.nodes[size_t(n.items)].shortest;
          if (v.size() > (size_t(1) << 20)) return Error("", "minItems makes the shortest value too long");
        }
        n.shortest = v + "]";
        break;
      }
      case SchemaKind::kString: n.shortest = "\"" + std::string(size_t(n.min_length), 'a') + "\""; break;
      case SchemaKind::kNumber:
      case SchemaKind::kInteger:
      case SchemaKind::kAnyValue: n.shortest = "0"; break;
      case SchemaKind::kAnyObject: n.shortest = "{}"; break;
      case SchemaKind::kAnyArray: n.shortest = "[]"; break;
      case SchemaKind::kLiterals: {
        n.shortest = n.literals.strings[0];
        for (const std::string& s : n.literals.strings) {
          if (s.size() < n.shortest.size()) n.shortest = s;
        }
        break;
      }
      case SchemaKind::kAnyOf: {
        n.shortest.clear();
        for (int32_t a : n.alternatives) {
          const std::string& s = out_.nodes[size_t(a)].shortest;
          if (n.shortest.empty() || s.size() < n.shortest.size()) n.shortest = s;
        }
        break;
      }
    }
    n.min_bytes = int64_t(n.shortest.size());
    return Status::Ok();
  }

  const Json& root_;
  CompiledSchema out_;
  std::vector<std::string> ref_stack_;
};

}  // namespace

int32_t LiteralTrie::Child(int32_t node, uint8_t byte) const {
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

Expected<CompiledSchema> CompileJsonSchema(const Json& schema) {
  try {
    return Compiler(schema).Run();
  } catch (const std::exception& e) {
    return Status::Error(std::string("json_schema: ") + e.what());
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
