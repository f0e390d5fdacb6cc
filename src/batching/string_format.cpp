#include "batching/string_format.h"

#include "batching/string_pattern.h"

namespace cellm {
namespace {

// RFC 3339 full-date: any day of months with 31, days up to 30 of the others, February's 29th
// in leap years only (divisible by 4, and by 400 where divisible by 100).
constexpr std::string_view kDate =
    "(?:\\d{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1\\d|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|"
    "(?:0[13578]|1[02])-31)|(?:\\d\\d(?:0[48]|[2468][048]|[13579][26])|"
    "(?:[02468][048]|[13579][26])00)-02-29)";
// RFC 3339 full-time without leap seconds: hh:mm:ss, fractions, then Z or an offset.
constexpr std::string_view kTime =
    "(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?(?:[Zz]|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)";
// RFC 3339 Appendix A: duration = "P" (dur-date / dur-time / dur-week).
constexpr std::string_view kDurationTime = "T(?:\\d+H(?:\\d+M(?:\\d+S)?)?|\\d+M(?:\\d+S)?|\\d+S)";
constexpr std::string_view kHex = "[0-9a-fA-F]";
constexpr std::string_view kIpv4Octet = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
// RFC 1123: labels of letters, digits and inner hyphens, 1 to 63 characters.
constexpr std::string_view kHostname =
    "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
    "[A-Za-z0-9])?)*";
// RFC 5322's atext: the characters of a dot-atom's atoms.
constexpr std::string_view kAtext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";

std::string anchored(std::string_view body) { return "^(?:" + std::string(body) + ")$"; }

std::string ipv4() {
  const std::string octet(kIpv4Octet);
  return octet + "(?:\\." + octet + "){3}";
}

// RFC 3986's IPv6address: up to eight 16-bit pieces, "::" once for a run of zero pieces, the last
// two pieces possibly written as an IPv4 address.
std::string ipv6() {
  const std::string h16 = std::string(kHex) + "{1,4}";
  const std::string ls32 = "(?:" + h16 + ":" + h16 + "|" + ipv4() + ")";
  const auto pieces = [&](int count) {  // count of "h16:"
    return count == 0 ? std::string() : "(?:" + h16 + ":){" + std::to_string(count) + "}";
  };
  const auto head = [&](int most) {  // [ *most( h16 ":" ) h16 ]
    return "(?:(?:" + h16 + ":){0," + std::to_string(most) + "}" + h16 + ")?";
  };
  std::string out = "(?:" + pieces(6) + ls32;
  out += "|::" + pieces(5) + ls32;
  out += "|(?:" + h16 + ")?::" + pieces(4) + ls32;
  for (int most = 1; most <= 4; ++most) out += "|" + head(most) + "::" + pieces(4 - most) + ls32;
  out += "|" + head(5) + "::" + h16;
  out += "|" + head(6) + "::)";
  return out;
}

// RFC 3986's URI: scheme ":" hier-part [ "?" query ] [ "#" fragment ], hier-part an authority
// and an absolute or empty path, an absolute path, a rootless one or nothing.
std::string uri() {
  // The unreserved characters and the sub-delimiters, then `extra`, as one class.
  const auto chars = [](std::string_view extra) {
    return "[A-Za-z0-9._~!$&'()*+,;=" + std::string(extra) + "-]";
  };
  const std::string pct = "%" + std::string(kHex) + "{2}";
  const std::string pchar = "(?:" + chars(":@") + "|" + pct + ")";
  const std::string path_abempty = "(?:/" + pchar + "*)*";
  const std::string ip_future = "v" + std::string(kHex) + "+\\." + chars(":") + "+";
  const std::string host = "(?:\\[(?:" + ipv6() + "|" + ip_future + ")\\]|(?:" + chars("") + "|" +
                           pct + ")*)";  // IPv4address is a reg-name too
  const std::string authority = "(?:(?:" + chars(":") + "|" + pct + ")*@)?" + host + "(?::\\d*)?";
  const std::string hier = "(?://" + authority + path_abempty + "|/(?:" + pchar + "+" +
                           path_abempty + ")?|" + pchar + "+" + path_abempty + ")?";
  const std::string query = "(?:" + pchar + "|[/?])*";
  return "[A-Za-z][A-Za-z0-9+.-]*:" + hier + "(?:\\?" + query + ")?(?:#" + query + ")?";
}

}  // namespace

std::optional<StringFormat> string_format(std::string_view name) {
  const uint32_t kNone = StringPattern::kUnbounded;
  if (name == "date") return StringFormat{anchored(kDate), kNone};
  if (name == "time") return StringFormat{anchored(kTime), kNone};
  if (name == "date-time") {
    return StringFormat{anchored(std::string(kDate) + "[Tt]" + std::string(kTime)), kNone};
  }
  if (name == "duration") {
    const std::string time(kDurationTime);
    return StringFormat{anchored("P(?:(?:\\d+D|\\d+M(?:\\d+D)?|\\d+Y(?:\\d+M(?:\\d+D)?)?)(?:" +
                                 time + ")?|" + time + "|\\d+W)"),
                        kNone};
  }
  if (name == "uuid") {
    const std::string h(kHex);
    return StringFormat{anchored(h + "{8}-" + h + "{4}-" + h + "{4}-" + h + "{4}-" + h + "{12}"),
                        kNone};
  }
  if (name == "ipv4") return StringFormat{anchored(ipv4()), kNone};
  if (name == "ipv6") return StringFormat{anchored(ipv6()), kNone};
  if (name == "hostname") return StringFormat{anchored(kHostname), 253};
  if (name == "email") {
    const std::string atext(kAtext);
    return StringFormat{anchored(atext + "+(?:\\." + atext + "+)*@" + std::string(kHostname)), 254};
  }
  if (name == "uri") return StringFormat{anchored(uri()), kNone};
  return std::nullopt;
}

}  // namespace cellm
