// The grammars generated for JSON Schema's `format` keyword on strings, each a
// regular expression (json_regex.h, matched whole) chosen as a subset of what
// the format's standard and Python's jsonschema format checker accept:
//   date       YYYY-MM-DD, year 1000-9999, day within its month (February <= 28)
//   time       hh:mm:ss[.f{1,6}](Z|+hh:mm|-hh:mm)   (RFC 3339 full-time, no leap second)
//   date-time  date 'T' time
//   duration   ISO 8601: PnW, or P[nY][nM][nD][T[nH][nM][nS]] with at least one
//              part (and one after T), n of 1-4 digits
//   uuid       8-4-4-4-12 hex digits
//   email      local part (1-3 dot-separated atoms of [A-Za-z0-9_%+-]) '@' a
//              hostname of 2-3 labels
//   ipv4       four decimal octets 0-255 without leading zeros
//   ipv6       RFC 4291 text forms (one '::' at most), no embedded IPv4, no zone
//   hostname   1-3 dot-separated labels: [A-Za-z0-9], then up to 61 of
//              [A-Za-z0-9-], ending alphanumeric (at most 191 bytes in all)
//   uri        scheme "://" host [":" port] *("/" segment) ["?" query] ["#" fragment]
//              with RFC 3986 pchar characters and %XX escapes
// Other formats are annotations, as in JSON Schema 2020-12 (and unchecked by
// jsonschema): the string is unconstrained.
#pragma once

#include <string>

namespace anymoe {

// The regex of a supported format, or "" when the format is an annotation.
std::string FormatRegex(const std::string& format);

}  // namespace anymoe
