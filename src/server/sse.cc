#include "server/sse.h"

namespace anymoe {

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

std::string SseData(const nlohmann::json& value) {
  std::string out = "data: ";
  out += DumpJson(value);
  out += "\n\n";
  return out;
}

}  // namespace anymoe
