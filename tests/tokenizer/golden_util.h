// Helpers shared by the tokenizer tests: paths under tests/golden/tokenizer and
// JSON loading with a clear failure when a golden file is missing.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace anymoe::testing {

inline std::string GoldenPath(const std::string& name) {
  return std::string(ANYMOE_GOLDEN_DIR) + "/tokenizer/" + name;
}

inline nlohmann::json LoadGoldenJson(const std::string& name) {
  std::ifstream in(GoldenPath(name), std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing golden file " << GoldenPath(name)
                         << " (regenerate with tools/gen_tokenizer_golden.py)";
  std::stringstream buffer;
  buffer << in.rdbuf();
  return nlohmann::json::parse(buffer.str());
}

inline std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace anymoe::testing
