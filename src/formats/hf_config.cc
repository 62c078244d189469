// config.json loading and typed access. All nlohmann accessors used here are
// guarded by type checks first, so nothing throws out of this file.
#include "formats/hf_config.h"

#include <cmath>
#include <filesystem>

#include "formats/parse_util.h"

namespace anymoe {
using Json = nlohmann::json;

std::optional<int64_t> JsonInteger(const Json& v) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(INT64_MAX)) return std::nullopt;
    return int64_t(u);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // 2^63 is exactly representable; anything below it and integral fits.
    if (std::isfinite(d) && d == std::trunc(d) && d >= -9223372036854775808.0 &&
        d < 9223372036854775808.0) {
      return int64_t(d);
    }
  }
  return std::nullopt;
}

std::string DescribeJson(const Json& v) {
  if (v.is_structured()) return v.type_name();
  std::string text = v.dump(-1, ' ', true, Json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 60) + "...";
  return std::string(v.type_name()) + " " + text;
}

namespace {

JsonLimits ConfigJsonLimits() {
  return JsonLimits{.max_depth = HfConfig::kMaxDepth,
                    .max_values = HfConfig::kMaxValues,
                    .max_containers = HfConfig::kMaxContainers};
}

}  // namespace

Expected<std::unique_ptr<HfConfig>> HfConfig::Load(const std::string& path) {
  std::error_code ec;
  std::string file = path;
  if (std::filesystem::is_directory(path, ec)) {
    file = (std::filesystem::path(path) / "config.json").string();
  }
  ASSIGN_OR_RETURN(Json j, ReadJsonFile(file, kMaxFileBytes, ConfigJsonLimits()));
  if (!j.is_object()) return Status::Error(file + ": config is not a JSON object");
  return std::unique_ptr<HfConfig>(new HfConfig(file, std::move(j)));
}

Expected<std::unique_ptr<HfConfig>> HfConfig::Parse(std::string_view text,
                                                    const std::string& name) {
  if (text.size() > kMaxFileBytes) {
    return Status::Error(name + ": config is " + std::to_string(text.size()) + " bytes, over the " +
                         std::to_string(kMaxFileBytes) + "-byte limit");
  }
  ASSIGN_OR_RETURN(Json j, ParseJsonStrict(text, name, ConfigJsonLimits()));
  if (!j.is_object()) return Status::Error(name + ": config is not a JSON object");
  return std::unique_ptr<HfConfig>(new HfConfig(name, std::move(j)));
}

const Json* HfConfig::Find(std::string_view key) const {
  if (auto it = json_.find(key); it != json_.end()) return &*it;
  const Json* node = &json_;
  while (true) {
    const size_t dot = key.find('.');
    const std::string_view part = key.substr(0, dot);
    if (!node->is_object()) return nullptr;
    auto it = node->find(part);
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string_view::npos) return node;
    key.remove_prefix(dot + 1);
  }
}

Status HfConfig::KeyError(std::string_view key, const std::string& what) const {
  return Status::Error(path_ + ": key " + QuoteName(key) + " " + what);
}

Expected<int64_t> HfConfig::GetInt(std::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr || v->is_null()) return KeyError(key, "is missing");
  const std::optional<int64_t> i = JsonInteger(*v);
  if (!i) return KeyError(key, "is " + DescribeJson(*v) + ", expected an integer");
  return *i;
}

Expected<double> HfConfig::GetDouble(std::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr || v->is_null()) return KeyError(key, "is missing");
  if (!v->is_number()) return KeyError(key, "is " + DescribeJson(*v) + ", expected a number");
  return v->get<double>();
}

int64_t HfConfig::GetInt(std::string_view key, int64_t fallback) const {
  const Json* v = Find(key);
  if (v == nullptr) return fallback;
  return JsonInteger(*v).value_or(fallback);
}

double HfConfig::GetDouble(std::string_view key, double fallback) const {
  const Json* v = Find(key);
  return (v != nullptr && v->is_number()) ? v->get<double>() : fallback;
}

bool HfConfig::GetBool(std::string_view key, bool fallback) const {
  const Json* v = Find(key);
  return (v != nullptr && v->is_boolean()) ? v->get<bool>() : fallback;
}

std::optional<std::string> HfConfig::GetString(std::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

}  // namespace anymoe
