#include "server/json_fields.h"

namespace anymoe {

using ojson = nlohmann::ordered_json;

const ojson* Field(const ojson& object, const char* name) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
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

std::string Indexed(const std::string& name, size_t i) {
  return name + "[" + std::to_string(i) + "]";
}

}  // namespace anymoe
