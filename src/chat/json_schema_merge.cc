// allOf merging (json_schema_merge.h), keyword by keyword.
#include "chat/json_schema_merge.h"

#include <algorithm>
#include <set>

namespace anymoe {
namespace {

using Json = nlohmann::ordered_json;

Status Refuse(const std::string& key, const std::string& path, const std::string& why) {
  return Status::Error("keyword '" + key + "' at " + (path.empty() ? "/" : path) + ": " + why);
}

std::set<std::string> Types(const Json& t) {
  std::set<std::string> out;
  if (t.is_string()) out.insert(t.get<std::string>());
  if (t.is_array()) {
    for (const Json& x : t) {
      if (x.is_string()) out.insert(x.get<std::string>());
    }
  }
  return out;
}

Json Both(const Json& x, const Json& y) { return Json{{"allOf", Json::array({x, y})}}; }

// Properties `s` allows beyond its listed ones: anything unless
// additionalProperties is false.
bool ForbidsExtra(const Json& s) {
  return s.contains("additionalProperties") && s["additionalProperties"].is_boolean() &&
         !s["additionalProperties"].get<bool>();
}

Expected<Json> MergeProperties(const Json& a, const Json& b, const Json& required, const std::string& path) {
  Json out = Json::object();
  const Json pa = a.value("properties", Json::object()), pb = b.value("properties", Json::object());
  std::set<std::string> names;
  for (auto it = pa.begin(); it != pa.end(); ++it) names.insert(it.key());
  for (auto it = pb.begin(); it != pb.end(); ++it) names.insert(it.key());
  const auto is_required = [&](const std::string& k) {
    return std::find(required.begin(), required.end(), Json(k)) != required.end();
  };
  // Keep the first part's order, then the second's.
  std::vector<std::string> order;
  for (auto it = pa.begin(); it != pa.end(); ++it) order.push_back(it.key());
  for (auto it = pb.begin(); it != pb.end(); ++it) {
    if (!pa.contains(it.key())) order.push_back(it.key());
  }
  for (const std::string& k : order) {
    const bool in_a = pa.contains(k), in_b = pb.contains(k);
    // A property one side does not list is an "extra" property there.
    if ((!in_a && ForbidsExtra(a)) || (!in_b && ForbidsExtra(b))) {
      if (is_required(k)) return Refuse("allOf", path, "required property '" + k + "' is forbidden by additionalProperties false");
      continue;
    }
    Json va = in_a ? pa[k] : a.value("additionalProperties", Json(true));
    Json vb = in_b ? pb[k] : b.value("additionalProperties", Json(true));
    if (va == Json(true)) out[k] = vb;
    else if (vb == Json(true) || va == vb) out[k] = va;
    else out[k] = Both(va, vb);
  }
  return out;
}

}  // namespace

bool IsSchemaAnnotation(const std::string& key) {
  static const std::set<std::string> kSet = {"title",      "description", "default",  "examples", "$schema",
                                             "$id",        "$comment",    "strict",   "$defs",    "definitions",
                                             "name",       "discriminator", "readOnly", "writeOnly", "deprecated",
                                             "$anchor",    "contentEncoding", "contentMediaType"};
  return kSet.count(key) > 0;
}

Expected<Json> MergeSchemas(const Json& a, const Json& b, const std::string& path) {
  if (a.is_boolean()) {
    if (!a.get<bool>()) return Refuse("allOf", path, "a part is the schema false, which accepts nothing");
    return b;
  }
  if (b.is_boolean()) return MergeSchemas(b, a, path);
  if (!a.is_object() || !b.is_object()) return Refuse("allOf", path, "a part is not a schema");
  // Distribute a union over the other part.
  for (const Json* u : {&a, &b}) {
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!u->contains(key)) continue;
      const Json& alts = (*u)[key];
      if (!alts.is_array() || alts.empty()) return Refuse(key, path, "must be a non-empty array");
      Json rest = *u;
      rest.erase(key);
      const Json& other = u == &a ? b : a;
      Json out = Json::array();
      for (const Json& alt : alts) out.push_back(Json{{"allOf", Json::array({rest, alt, other})}});
      return Json{{key, out}};
    }
  }
  Json out = a;
  for (auto it = b.begin(); it != b.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    if (!out.contains(k)) {
      out[k] = v;
      continue;
    }
    const Json& u = out[k];
    if (IsSchemaAnnotation(k) || u == v) continue;
    if (k == "type") {
      std::set<std::string> ta = Types(u), tb = Types(v), both;
      for (const std::string& t : ta) {
        if (tb.count(t) || (t == "integer" && tb.count("number"))) both.insert(t);
        else if (t == "number" && tb.count("integer")) both.insert("integer");
      }
      if (both.empty()) return Refuse("allOf", path, "the parts' types have nothing in common");
      out[k] = both.size() == 1 ? Json(*both.begin()) : Json(std::vector<std::string>(both.begin(), both.end()));
    } else if (k == "minimum" || k == "exclusiveMinimum" || k == "minLength" || k == "minItems" ||
               k == "minProperties") {
      if (!u.is_number() || !v.is_number()) return Refuse(k, path, "must be a number");
      out[k] = u.get<double>() >= v.get<double>() ? u : v;
    } else if (k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" || k == "maxItems" ||
               k == "maxProperties") {
      if (!u.is_number() || !v.is_number()) return Refuse(k, path, "must be a number");
      out[k] = u.get<double>() <= v.get<double>() ? u : v;
    } else if (k == "required") {
      if (!u.is_array() || !v.is_array()) return Refuse(k, path, "must be an array");
      Json r = u;
      for (const Json& x : v) {
        if (std::find(r.begin(), r.end(), x) == r.end()) r.push_back(x);
      }
      out[k] = r;
    } else if (k == "enum") {
      if (!u.is_array() || !v.is_array()) return Refuse(k, path, "must be an array");
      Json e = Json::array();
      for (const Json& x : u) {
        if (std::find(v.begin(), v.end(), x) != v.end()) e.push_back(x);
      }
      if (e.empty()) return Refuse("allOf", path, "the parts' enums have no value in common");
      out[k] = e;
    } else if (k == "const") {
      return Refuse("allOf", path, "the parts' const values differ");
    } else if (k == "items" || k == "additionalProperties" || k == "propertyNames") {
      if (u == Json(false) || v == Json(false)) out[k] = false;
      else if (u == Json(true)) out[k] = v;
      else if (v != Json(true)) out[k] = Both(u, v);
    } else if (k == "properties") {
      continue;  // below, once additionalProperties of both sides is known
    } else if (k == "allOf") {
      Json all = u;
      for (const Json& x : v) all.push_back(x);
      out[k] = all;
    } else {
      return Refuse(k, path, "two allOf parts set it differently, which one schema cannot say");
    }
  }
  if (a.contains("properties") || b.contains("properties")) {
    ASSIGN_OR_RETURN(Json props, MergeProperties(a, b, out.value("required", Json::array()), path));
    out["properties"] = props;
  }
  return out;
}

}  // namespace anymoe
