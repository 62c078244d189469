#include "server/json_fields.h"

namespace anymoe {

using ojson = nlohmann::ordered_json;

namespace {
template <typename Json>
const Json* FieldOf(const Json& object, const char* name) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}
}  // namespace

const ojson* Field(const ojson& object, const char* name) { return FieldOf(object, name); }
const nlohmann::json* Field(const nlohmann::json& object, const char* name) {
  return FieldOf(object, name);
}

std::optional<ApiError> ReadArray(const ojson& object, const char* key, size_t max_items,
                                  bool required, const ojson** out) {
  const std::string name = key;
  *out = Field(object, key);
  if (*out == nullptr) {
    return required ? std::optional<ApiError>(InvalidField(name, name + " is required"))
                    : std::nullopt;
  }
  if (!(*out)->is_array()) return InvalidField(name, name + " must be an array", "invalid_type");
  if (required && (*out)->empty()) return InvalidField(name, name + " must not be empty");
  if ((*out)->size() > max_items) {
    return InvalidField(name, "at most " + std::to_string(max_items) + " " + name);
  }
  return std::nullopt;
}

std::optional<ApiError> ReadString(const ojson& object, const char* key, const std::string& param,
                                   std::string* out, bool required) {
  const ojson* v = Field(object, key);
  if (v == nullptr) {
    if (required) return InvalidField(param, param + " is required");
    return std::nullopt;
  }
  if (!v->is_string()) return InvalidField(param, param + " must be a string", "invalid_type");
  *out = v->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> ReadTextParts(const ojson& v, const std::string& name,
                                      std::initializer_list<std::string_view> types,
                                      std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) {
    return InvalidField(name, name + " must be a string or an array of text parts",
                        "invalid_type");
  }
  std::string allowed;
  for (std::string_view t : types) allowed += (allowed.empty() ? "" : " or ") + std::string(t);
  out->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string pn = Indexed(name, i);
    std::string type, text;
    if (!v[i].is_object()) return InvalidField(pn, pn + " must be an object", "invalid_type");
    RETURN_IF_API_ERROR(ReadString(v[i], "type", pn + ".type", &type, /*required=*/true));
    bool known = false;
    for (std::string_view t : types) known |= type == t;
    if (!known) return InvalidField(pn + ".type", pn + ".type must be " + allowed);
    RETURN_IF_API_ERROR(ReadString(v[i], "text", pn + ".text", &text, /*required=*/true));
    *out += text;
  }
  return std::nullopt;
}

std::string Indexed(const std::string& name, size_t i) {
  return name + "[" + std::to_string(i) + "]";
}

}  // namespace anymoe
