// Python text semantics on UTF-8 strings (see python_text.h). Case mapping uses
// utf8proc's simple mappings (one code point to one), which is what Python does
// except for the few special casings (e.g. German sharp s), which chat templates
// do not rely on.
#include "chat/jinja/python_text.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "tokenizer/unicode_class.h"

namespace anymoe::jinja {

std::vector<uint32_t> CodePoints(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t len;
    if (DecodeUtf8At(s, i, &cp, &len) != Utf8Step::kValid) {
      cp = 0xFFFD;
      len = std::max<size_t>(len, 1);
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string FromCodePoints(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) AppendUtf8(cps[i], &out);
  return out;
}

bool PyIsSpace(uint32_t cp) { return IsPythonSpace(cp); }

std::string_view PyStrip(std::string_view s, int sides, const std::string* chars) {
  const std::vector<TextChar> text = DecodeText(s);
  std::vector<uint32_t> set;
  if (chars) set = CodePoints(*chars);
  const auto strip = [&](const TextChar& c) {
    if (c.cp == kInvalidCodepoint) return false;
    if (!chars) return IsPythonSpace(c.cp);
    return std::find(set.begin(), set.end(), c.cp) != set.end();
  };
  size_t first = 0, last = text.size();
  if (sides & kStripLeft) {
    while (first < last && strip(text[first])) ++first;
  }
  if (sides & kStripRight) {
    while (last > first && strip(text[last - 1])) --last;
  }
  if (first == last) return {};
  const size_t begin = text[first].offset;
  return s.substr(begin, text[last - 1].offset + text[last - 1].len - begin);
}

namespace {

std::vector<std::string> SplitWhitespace(std::string_view s, int64_t maxsplit, bool from_right) {
  const std::vector<TextChar> text = DecodeText(s);
  std::vector<std::pair<size_t, size_t>> words;  // byte ranges
  const auto space = [&](size_t i) {
    return text[i].cp != kInvalidCodepoint && IsPythonSpace(text[i].cp);
  };
  const size_t n = text.size();
  if (!from_right) {
    size_t i = 0;
    while (i < n) {
      while (i < n && space(i)) ++i;
      if (i == n) break;
      if (maxsplit >= 0 && int64_t(words.size()) == maxsplit) {
        size_t end = n;
        while (end > i && space(end - 1)) --end;
        words.push_back({text[i].offset, text[end - 1].offset + text[end - 1].len});
        break;
      }
      const size_t start = i;
      while (i < n && !space(i)) ++i;
      words.push_back({text[start].offset, text[i - 1].offset + text[i - 1].len});
    }
  } else {
    size_t i = n;
    while (i > 0) {
      while (i > 0 && space(i - 1)) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && int64_t(words.size()) == maxsplit) {
        size_t start = 0;
        while (start < i && space(start)) ++start;
        words.push_back({text[start].offset, text[i - 1].offset + text[i - 1].len});
        break;
      }
      const size_t end = i;
      while (i > 0 && !space(i - 1)) --i;
      words.push_back({text[i].offset, text[end - 1].offset + text[end - 1].len});
    }
    std::reverse(words.begin(), words.end());
  }
  std::vector<std::string> out;
  for (auto [b, e] : words) out.emplace_back(s.substr(b, e - b));
  return out;
}

}  // namespace

std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit,
                                 bool from_right) {
  if (!sep) return SplitWhitespace(s, maxsplit, from_right);
  if (sep->empty()) Fail("empty separator", "ValueError");
  std::vector<std::string> out;
  if (!from_right) {
    size_t pos = 0;
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      const size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
  } else {
    size_t end = s.size();
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
  }
  return out;
}

std::vector<std::string> PySplitLines(std::string_view s) {
  const std::vector<uint32_t> cps = CodePoints(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const uint32_t c = cps[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
                     c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    out.push_back(FromCodePoints(cps, start, i));
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < cps.size()) out.push_back(FromCodePoints(cps, start, cps.size()));
  return out;
}

namespace {

uint32_t Upper(uint32_t cp) { return uint32_t(utf8proc_toupper(utf8proc_int32_t(cp))); }
uint32_t Lower(uint32_t cp) { return uint32_t(utf8proc_tolower(utf8proc_int32_t(cp))); }
bool IsCased(uint32_t cp) { return Upper(cp) != cp || Lower(cp) != cp || utf8proc_totitle(cp) != int(cp); }

template <typename F>
std::string MapCodePoints(std::string_view s, F f) {
  std::string out;
  for (uint32_t cp : CodePoints(s)) AppendUtf8(f(cp), &out);
  return out;
}

}  // namespace

std::string PyUpper(std::string_view s) { return MapCodePoints(s, Upper); }
std::string PyLower(std::string_view s) { return MapCodePoints(s, Lower); }

std::string PyTitle(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (uint32_t cp : CodePoints(s)) {
    const uint32_t mapped = previous_cased ? Lower(cp) : uint32_t(utf8proc_totitle(cp));
    AppendUtf8(mapped, &out);
    previous_cased = IsCased(cp);
  }
  return out;
}

// jinja2: "".join(w[0].upper() + w[1:].lower() for w in re.split(r"([-\s({\[<]+)", s) if w)
std::string JinjaTitle(std::string_view s) {
  const std::vector<uint32_t> cps = CodePoints(s);
  const auto separator = [](uint32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPythonSpace(c);
  };
  std::string out;
  size_t i = 0;
  while (i < cps.size()) {
    const bool sep = separator(cps[i]);
    size_t j = i;
    while (j < cps.size() && separator(cps[j]) == sep) ++j;
    for (size_t k = i; k < j; ++k) AppendUtf8(k == i ? Upper(cps[k]) : Lower(cps[k]), &out);
    i = j;
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  const std::vector<uint32_t> cps = CodePoints(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    AppendUtf8(i == 0 ? uint32_t(utf8proc_totitle(cps[i])) : Lower(cps[i]), &out);
  }
  return out;
}

std::string PyFloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // e.g. "-1.2345e+02"
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string mantissa = sci.substr(0, e);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {  // Python: fixed notation here
    if (exponent >= 0) {
      if (digits.size() <= size_t(exponent) + 1) {
        out += digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
      }
    } else {
      out += "0." + std::string(-exponent - 1, '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

namespace {

// One UTF-16 code unit as \uXXXX.
void AppendHex4(uint16_t unit, std::string* out) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\u%04x", unsigned(unit));
  *out += buf;
}

void JsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  *out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      switch (c) {
        case '"': *out += "\\\""; break;
        case '\\': *out += "\\\\"; break;
        case '\n': *out += "\\n"; break;
        case '\r': *out += "\\r"; break;
        case '\t': *out += "\\t"; break;
        case '\b': *out += "\\b"; break;
        case '\f': *out += "\\f"; break;
        default:
          if (c < 0x20) {
            AppendHex4(uint16_t(c), out);
          } else {
            *out += char(c);
          }
      }
      ++i;
      continue;
    }
    uint32_t cp;
    size_t len;
    if (DecodeUtf8At(s, i, &cp, &len) != Utf8Step::kValid) {
      cp = 0xFFFD;
      len = std::max<size_t>(len, 1);
    }
    if (!ensure_ascii) {
      if (cp == 0xFFFD) {
        AppendUtf8(cp, out);
      } else {
        out->append(s.substr(i, len));
      }
    } else if (cp >= 0x10000) {
      const uint32_t v = cp - 0x10000;
      AppendHex4(uint16_t(0xD800 + (v >> 10)), out);
      AppendHex4(uint16_t(0xDC00 + (v & 0x3FF)), out);
    } else {
      AppendHex4(uint16_t(cp), out);
    }
    i += len;
  }
  *out += '"';
}

void Dump(const Value& v, const JsonDumpOptions& o, int64_t level, std::string* out, int depth) {
  if (depth > 200) Fail("maximum recursion depth exceeded in tojson", "RecursionError");
  switch (v.kind()) {
    case ValueKind::kNone: *out += "null"; return;
    case ValueKind::kBool: *out += v.bool_value() ? "true" : "false"; return;
    case ValueKind::kInt: *out += std::to_string(v.int_value()); return;
    case ValueKind::kFloat: {
      const double f = v.float_value();
      if (std::isnan(f)) *out += "NaN";
      else if (std::isinf(f)) *out += f < 0 ? "-Infinity" : "Infinity";
      else *out += PyFloatRepr(f);
      return;
    }
    case ValueKind::kString: JsonString(v.str(), o.ensure_ascii, out); return;
    default: break;
  }
  const bool indented = o.indent >= 0;
  const std::string item_sep =
      o.custom_separators ? o.item_separator : (indented ? "," : ", ");
  const std::string newline_indent =
      indented ? "\n" + std::string(size_t(o.indent * (level + 1)), ' ') : "";
  const std::string close_indent = indented ? "\n" + std::string(size_t(o.indent * level), ' ') : "";
  if (v.is_list()) {
    const auto& items = v.items();
    if (items.empty()) {
      *out += "[]";
      return;
    }
    *out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) *out += item_sep;
      *out += newline_indent;
      Dump(items[i], o, level + 1, out, depth + 1);
    }
    *out += close_indent + "]";
    return;
  }
  if (v.is_dict()) {
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : v.dict().entries) entries.push_back(&e);
    if (o.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](auto* a, auto* b) { return Less(a->first, b->first); });
    }
    if (entries.empty()) {
      *out += "{}";
      return;
    }
    *out += '{';
    bool first = true;
    for (const auto* e : entries) {
      std::string key;
      switch (e->first.kind()) {
        case ValueKind::kString: key = e->first.str(); break;
        case ValueKind::kBool: key = e->first.bool_value() ? "true" : "false"; break;
        case ValueKind::kInt: key = std::to_string(e->first.int_value()); break;
        case ValueKind::kFloat: key = PyFloatRepr(e->first.float_value()); break;
        case ValueKind::kNone: key = "null"; break;
        default: Fail(std::string("keys must be str, int, float, bool or None, not ") +
                      TypeName(e->first));
      }
      if (!first) *out += item_sep;
      first = false;
      *out += newline_indent;
      JsonString(key, o.ensure_ascii, out);
      *out += o.key_separator;
      Dump(e->second, o, level + 1, out, depth + 1);
    }
    *out += close_indent + "}";
    return;
  }
  Fail(std::string("Object of type ") + TypeName(v) + " is not JSON serializable");
}

}  // namespace

std::string PyJsonDumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  Dump(v, options, 0, &out, 0);
  return out;
}

std::string PyStrRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (uint32_t cp : CodePoints(s)) {
    if (cp == uint32_t(quote) || cp == '\\') {
      out += '\\';
      out += char(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      out += buf;
    } else {
      AppendUtf8(cp, &out);
    }
  }
  out += quote;
  return out;
}

}  // namespace anymoe::jinja
