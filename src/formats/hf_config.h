// A Hugging Face config.json: the hyper-parameters of a safetensors model. Parsed
// strictly (size and nesting capped, duplicate keys rejected) and read through
// typed getters so that model code never calls throwing nlohmann accessors.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace anymoe {

// The integer value of `v`: an integer, or a float with an integral value
// that fits in int64 (4096.0 is 4096; 64.5 and 1e300 are not integers).
std::optional<int64_t> JsonInteger(const nlohmann::json& v);
// "number 4.5", "string \"abc\"", or just "object" / "array" for containers,
// cut to a line: for error messages about values read from files.
std::string DescribeJson(const nlohmann::json& v);

class HfConfig {
 public:
  static constexpr uint64_t kMaxFileBytes = 16 << 20;
  static constexpr int kMaxDepth = 64;
  // Real configs hold a few hundred to a few thousand values (layer lists,
  // nested text/vision configs); a hostile one of `{},` stops here, not at
  // 16 MiB (5.6 million objects).
  static constexpr uint64_t kMaxValues = 1 << 16;
  static constexpr uint64_t kMaxContainers = 1 << 13;

  // Loads `path`: a config.json file, or a folder that holds one.
  static Expected<std::unique_ptr<HfConfig>> Load(const std::string& path);
  // Parses config text; `name` stands for the file in error messages.
  static Expected<std::unique_ptr<HfConfig>> Parse(std::string_view text, const std::string& name);

  const std::string& path() const { return path_; }
  const nlohmann::json& json() const { return json_; }

  // The value at `key`, or nullptr. A dotted key ("rope_scaling.factor",
  // "text_config.hidden_size") walks nested objects; a top-level key containing
  // dots is found first.
  const nlohmann::json* Find(std::string_view key) const;

  // An integer (or an integral float such as 4096.0) in int64 range; otherwise an
  // error naming the file and key.
  Expected<int64_t> GetInt(std::string_view key) const;
  // Any number.
  Expected<double> GetDouble(std::string_view key) const;
  // The fallback forms return `fallback` when the key is absent, null, or not of
  // the requested type; use the Expected forms to report bad types.
  int64_t GetInt(std::string_view key, int64_t fallback) const;
  double GetDouble(std::string_view key, double fallback) const;
  bool GetBool(std::string_view key, bool fallback) const;
  std::optional<std::string> GetString(std::string_view key) const;  // nullopt unless a string

 private:
  HfConfig(std::string path, nlohmann::json json)
      : path_(std::move(path)), json_(std::move(json)) {}
  Status KeyError(std::string_view key, const std::string& what) const;

  std::string path_;
  nlohmann::json json_;
};

}  // namespace anymoe
