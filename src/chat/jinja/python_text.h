// Python's text behaviours that chat templates' output depends on, on UTF-8
// strings: str.strip/split/title/upper with Python's notion of whitespace and
// code-point indexing, repr(float), and json.dumps as transformers' tojson
// filter calls it (", " / ": " separators, key order kept, ensure_ascii).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja/value.h"

namespace anymoe::jinja {

// Code points of a UTF-8 string (invalid bytes map to U+FFFD).
std::vector<uint32_t> CodePoints(std::string_view s);
std::string FromCodePoints(const std::vector<uint32_t>& cps, size_t begin, size_t end);

// str.strip / lstrip / rstrip; `chars` null: Python whitespace.
enum StripSide { kStripLeft = 1, kStripRight = 2, kStripBoth = 3 };
std::string_view PyStrip(std::string_view s, int sides, const std::string* chars);

// str.split(sep, maxsplit) / rsplit; sep null: runs of whitespace.
std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit,
                                 bool from_right);
// str.splitlines().
std::vector<std::string> PySplitLines(std::string_view s);

std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);       // str.title()
std::string JinjaTitle(std::string_view s);    // jinja2's |title filter
std::string PyCapitalize(std::string_view s);  // str.capitalize()
bool PyIsSpace(uint32_t cp);

// repr(float): shortest round-trip digits, "3.0", "1e-05", "1e+16", "inf", "nan".
std::string PyFloatRepr(double f);

// json.dumps(v, ensure_ascii, indent, separators, sort_keys). indent < 0: none.
// Throws JinjaError (TypeError) on values JSON cannot hold (Undefined, callables).
struct JsonDumpOptions {
  bool ensure_ascii = false;
  int64_t indent = -1;
  std::string item_separator;  // empty: Python's default for the indent
  std::string key_separator = ": ";
  bool custom_separators = false;
  bool sort_keys = false;
};
std::string PyJsonDumps(const Value& v, const JsonDumpOptions& options);

// repr(str).
std::string PyStrRepr(std::string_view s);

}  // namespace anymoe::jinja
