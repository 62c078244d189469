// Format grammars (json_string_formats.h). Kept as regular expressions so each
// reads like the standard's grammar and compiles through the same DFA path as
// `pattern`.
#include "chat/json_string_formats.h"

#include <map>

namespace anymoe {
namespace {

const std::string kDate =
    "[1-9][0-9]{3}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"
    "02-(?:0[1-9]|1[0-9]|2[0-8]))";
const std::string kTime =
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
const std::string kN = "[0-9]{1,4}";
const std::string kTimePart =
    "T(?:" + kN + "H(?:" + kN + "M)?(?:" + kN + "S)?|" + kN + "M(?:" + kN + "S)?|" + kN + "S)";
const std::string kDuration = "P(?:" + kN + "W|(?:" + kN + "Y(?:" + kN + "M)?(?:" + kN + "D)?|" + kN + "M(?:" + kN +
                              "D)?|" + kN + "D)(?:" + kTimePart + ")?|" + kTimePart + ")";
const std::string kHex4 = "[0-9a-fA-F]{4}";
const std::string kUuid = "[0-9a-fA-F]{8}-" + kHex4 + "-" + kHex4 + "-" + kHex4 + "-[0-9a-fA-F]{12}";
const std::string kLabel = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
const std::string kHostname = kLabel + "(?:\\." + kLabel + "){0,2}";
const std::string kAtom = "[A-Za-z0-9_%+-]{1,32}";
const std::string kEmail = kAtom + "(?:\\." + kAtom + "){0,2}@" + kLabel + "(?:\\." + kLabel + "){1,2}";
const std::string kOctet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const std::string kIpv4 = kOctet + "(?:\\." + kOctet + "){3}";
const std::string kH = "[0-9a-fA-F]{1,4}";
const std::string kIpv6 = "(?:(?:" + kH + ":){7}" + kH + "|(?:" + kH + ":){1,7}:|(?:" + kH + ":){1,6}:" + kH +
                          "|(?:" + kH + ":){1,5}(?::" + kH + "){1,2}|(?:" + kH + ":){1,4}(?::" + kH +
                          "){1,3}|(?:" + kH + ":){1,3}(?::" + kH + "){1,4}|(?:" + kH + ":){1,2}(?::" + kH +
                          "){1,5}|" + kH + ":(?::" + kH + "){1,6}|:(?:(?::" + kH + "){1,7}|:))";
const std::string kPchar = "(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})";
const std::string kUri = "[a-z][a-z0-9+.-]{0,15}://[A-Za-z0-9._~-]{1,63}(?::[0-9]{1,5})?(?:/" + kPchar + "*)*(?:\\?(?:" +
                         kPchar + "|[/?])*)?(?:#(?:" + kPchar + "|[/?])*)?";

}  // namespace

std::string FormatRegex(const std::string& format) {
  static const std::map<std::string, std::string> kFormats = {
      {"date", kDate},         {"time", kTime},   {"date-time", kDate + "T" + kTime},
      {"duration", kDuration}, {"uuid", kUuid},   {"email", kEmail},
      {"ipv4", kIpv4},         {"ipv6", kIpv6},   {"hostname", kHostname},
      {"uri", kUri},
  };
  const auto it = kFormats.find(format);
  return it == kFormats.end() ? std::string() : it->second;
}

}  // namespace anymoe
