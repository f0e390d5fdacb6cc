// An independent check of the JSON Schema string formats (test and fuzz only): hand-written
// parsers of RFC 3339's dates, times and durations, RFC 1123 hostnames and RFC 5321 mailboxes,
// the C library's inet_pton for addresses and its calendar (timegm) for days of the month. It
// shares no code with string_format.cpp's regular expressions; it takes the whole of each format
// (leap seconds, quoted local parts, address literals), so that the tests can tell which of its
// strings the expressions leave out on purpose (`format_outside_cellms_subset`).
#pragma once

#include <arpa/inet.h>

#include <cctype>
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

namespace cellm::testing {

inline bool oracle_digits(std::string_view text, size_t at, size_t count, int* value) {
  if (at + count > text.size()) return false;
  int v = 0;
  for (size_t i = at; i < at + count; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    v = v * 10 + (text[i] - '0');
  }
  *value = v;
  return true;
}

// YYYY-MM-DD with a day the calendar has (timegm normalizes a day past the month's end).
inline bool oracle_is_date(std::string_view text) {
  int year = 0, month = 0, day = 0;
  if (text.size() != 10 || text[4] != '-' || text[7] != '-') return false;
  if (!oracle_digits(text, 0, 4, &year) || !oracle_digits(text, 5, 2, &month) ||
      !oracle_digits(text, 8, 2, &day)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31) return false;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = 12;
  const time_t t = timegm(&tm);
  std::tm back{};
  gmtime_r(&t, &back);
  return back.tm_mday == day && back.tm_mon == month - 1;
}

// hh:mm:ss[.f+](Z|±hh:mm); second 60 only where the UTC time is 23:59.
inline bool oracle_is_time(std::string_view text, bool* leap_second = nullptr) {
  int hour = 0, minute = 0, second = 0;
  if (text.size() < 9 || text[2] != ':' || text[5] != ':') return false;
  if (!oracle_digits(text, 0, 2, &hour) || !oracle_digits(text, 3, 2, &minute) ||
      !oracle_digits(text, 6, 2, &second)) {
    return false;
  }
  if (hour > 23 || minute > 59 || second > 60) return false;
  size_t at = 8;
  if (at < text.size() && text[at] == '.') {
    const size_t first = ++at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
    if (at == first) return false;
  }
  int offset_minutes = 0;
  std::string_view zone = text.substr(at);
  if (zone == "Z" || zone == "z") {
    offset_minutes = 0;
  } else {
    int oh = 0, om = 0;
    if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || zone[3] != ':') return false;
    if (!oracle_digits(zone, 1, 2, &oh) || !oracle_digits(zone, 4, 2, &om)) return false;
    if (oh > 23 || om > 59) return false;
    offset_minutes = (zone[0] == '+' ? 1 : -1) * (oh * 60 + om);
  }
  if (leap_second != nullptr) *leap_second = second == 60;
  if (second == 60) {
    const int utc = ((hour * 60 + minute - offset_minutes) % 1440 + 1440) % 1440;
    return utc == 23 * 60 + 59;
  }
  return true;
}

inline bool oracle_is_date_time(std::string_view text, bool* leap_second = nullptr) {
  return text.size() > 11 && (text[10] == 'T' || text[10] == 't') &&
         oracle_is_date(text.substr(0, 10)) && oracle_is_time(text.substr(11), leap_second);
}

// RFC 3339 Appendix A, read as its grammar: "P", then weeks alone, or date units (a run of
// "YMD" in order) and or a "T" with time units (a run of "HMS" in order).
inline bool oracle_is_duration(std::string_view text) {
  if (text.empty() || text[0] != 'P') return false;
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t at = 1;
  // Number-unit pairs up to a 'T' or the end; false for a number without its unit.
  const auto read_units = [&](std::string* units) {
    while (at < text.size() && text[at] != 'T') {
      if (!digit(text[at])) return false;
      while (at < text.size() && digit(text[at])) ++at;
      if (at == text.size()) return false;
      units->push_back(text[at++]);
    }
    return true;
  };
  const auto run_of = [](std::string_view order, const std::string& units) {
    return !units.empty() && order.find(units) != std::string_view::npos;
  };
  std::string date_units, time_units;
  if (!read_units(&date_units)) return false;
  if (date_units == "W") return at == text.size();
  if (!date_units.empty() && !run_of("YMD", date_units)) return false;
  if (at < text.size()) {
    ++at;  // the 'T'
    if (!read_units(&time_units) || at != text.size() || !run_of("HMS", time_units)) {
      return false;
    }
  }
  return !date_units.empty() || !time_units.empty();
}

inline bool oracle_is_uuid(std::string_view text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !std::isxdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return true;
}

inline bool oracle_is_ip(std::string_view text, int family) {
  unsigned char bytes[16];
  return text.find('\0') == std::string_view::npos &&
         inet_pton(family, std::string(text).c_str(), bytes) == 1;
}

inline bool oracle_is_hostname(std::string_view text) {
  if (text.empty() || text.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = text.find('.', start);
    const std::string_view label =
        text.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (const char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// RFC 5321 Mailbox: a dot-atom or quoted local part, at a hostname or an address literal.
inline bool oracle_is_email(std::string_view text, bool* outside_dot_atom = nullptr) {
  const size_t at = text.rfind('@');
  if (at == std::string_view::npos || text.size() > 254) return false;
  const std::string_view local = text.substr(0, at);
  const std::string_view domain = text.substr(at + 1);
  if (local.empty()) return false;
  bool quoted_or_literal = false;
  if (local.front() == '"') {
    if (local.size() < 2 || local.back() != '"') return false;
    for (size_t i = 1; i + 1 < local.size(); ++i) {
      const auto c = static_cast<unsigned char>(local[i]);
      if (c == '\\') {
        if (++i + 1 >= local.size() || local[i] < 32 || local[i] > 126) return false;
      } else if (c < 32 || c > 126 || c == '"') {
        return false;
      }
    }
    quoted_or_literal = true;
  } else {
    static constexpr std::string_view kAtext = "!#$%&'*+/=?^_`{|}~-";
    if (local.front() == '.' || local.back() == '.' || local.find("..") != std::string_view::npos) {
      return false;
    }
    for (const char c : local) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' &&
          kAtext.find(c) == std::string_view::npos) {
        return false;
      }
    }
  }
  bool domain_ok = oracle_is_hostname(domain);
  if (!domain_ok && domain.size() > 2 && domain.front() == '[' && domain.back() == ']') {
    const std::string_view inner = domain.substr(1, domain.size() - 2);
    domain_ok = oracle_is_ip(inner, AF_INET) ||
                (inner.substr(0, 5) == "IPv6:" && oracle_is_ip(inner.substr(5), AF_INET6));
    quoted_or_literal = true;
  }
  if (outside_dot_atom != nullptr) *outside_dot_atom = quoted_or_literal;
  return domain_ok;
}

// RFC 3986's URI, parsed by its grammar from left to right: the scheme up to ':', an authority
// after "//" up to the path (userinfo before an '@', a bracketed IP literal or a reg-name, a
// port), the path's segments, the query after '?', the fragment after '#'.
inline bool oracle_is_uri(std::string_view text) {
  const auto is = [](char c, std::string_view set) {
    return std::isalnum(static_cast<unsigned char>(c)) || set.find(c) != std::string_view::npos;
  };
  constexpr std::string_view kUnreservedAndSubDelims = "-._~!$&'()*+,;=";
  // The characters of `part` are `allowed` ones (beside letters and digits) or %XX.
  const auto chars_ok = [&](std::string_view part, std::string_view allowed) {
    for (size_t i = 0; i < part.size(); ++i) {
      if (part[i] == '%') {
        if (i + 2 >= part.size() || !std::isxdigit(static_cast<unsigned char>(part[i + 1])) ||
            !std::isxdigit(static_cast<unsigned char>(part[i + 2]))) {
          return false;
        }
        i += 2;
      } else if (!is(part[i], allowed)) {
        return false;
      }
    }
    return true;
  };
  const std::string pchar = std::string(kUnreservedAndSubDelims) + ":@";
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 ||
      !std::isalpha(static_cast<unsigned char>(text[0]))) {
    return false;
  }
  for (size_t i = 1; i < colon; ++i) {
    if (!is(text[i], "+-.")) return false;
  }
  std::string_view rest = text.substr(colon + 1);
  const size_t hash = rest.find('#');
  if (hash != std::string_view::npos) {
    if (!chars_ok(rest.substr(hash + 1), pchar + "/?")) return false;
    rest = rest.substr(0, hash);
  }
  const size_t question = rest.find('?');
  if (question != std::string_view::npos) {
    if (!chars_ok(rest.substr(question + 1), pchar + "/?")) return false;
    rest = rest.substr(0, question);
  }
  std::string_view path = rest;
  if (rest.substr(0, 2) == "//") {
    const size_t end = rest.find('/', 2);
    std::string_view authority =
        rest.substr(2, end == std::string_view::npos ? rest.npos : end - 2);
    path = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    const size_t at = authority.find('@');
    if (at != std::string_view::npos) {
      if (!chars_ok(authority.substr(0, at), std::string(kUnreservedAndSubDelims) + ":")) {
        return false;
      }
      authority = authority.substr(at + 1);
    }
    std::string_view port;
    if (!authority.empty() && authority[0] == '[') {
      const size_t close = authority.find(']');
      if (close == std::string_view::npos) return false;
      const std::string_view literal = authority.substr(1, close - 1);
      port = authority.substr(close + 1);
      bool future = literal.size() > 3 && (literal[0] == 'v' || literal[0] == 'V');
      if (future) {
        const size_t dot = literal.find('.');
        future = dot != std::string_view::npos && dot > 1 && dot + 1 < literal.size();
        for (size_t i = 1; future && i < dot; ++i) {
          future = std::isxdigit(static_cast<unsigned char>(literal[i])) != 0;
        }
        for (size_t i = dot + 1; future && i < literal.size(); ++i) {
          future = is(literal[i], std::string(kUnreservedAndSubDelims) + ":");
        }
      }
      if (!future && !oracle_is_ip(literal, AF_INET6)) return false;
    } else {
      const size_t port_colon = authority.find(':');
      port =
          port_colon == std::string_view::npos ? std::string_view() : authority.substr(port_colon);
      if (!chars_ok(authority.substr(0, port_colon), kUnreservedAndSubDelims)) return false;
    }
    if (!port.empty()) {
      if (port[0] != ':') return false;
      for (size_t i = 1; i < port.size(); ++i) {
        if (port[i] < '0' || port[i] > '9') return false;
      }
    }
    if (!path.empty() && path[0] != '/') return false;  // path-abempty
  }
  return chars_ok(path, pchar + "/");  // segments (without an authority, never "//" first)
}

// Whether `text` is a `format` string; true for a format the oracle does not know.
inline bool oracle_matches_format(std::string_view format, std::string_view text) {
  if (format == "date") return oracle_is_date(text);
  if (format == "time") return oracle_is_time(text);
  if (format == "date-time") return oracle_is_date_time(text);
  if (format == "duration") return oracle_is_duration(text);
  if (format == "uuid") return oracle_is_uuid(text);
  if (format == "ipv4") return oracle_is_ip(text, AF_INET);
  if (format == "ipv6") return oracle_is_ip(text, AF_INET6);
  if (format == "hostname") return oracle_is_hostname(text);
  if (format == "email") return oracle_is_email(text);
  if (format == "uri") return oracle_is_uri(text);
  return true;
}

// Whether `text`, valid for `format`, is one of the strings cellm's expressions leave out on
// purpose (string_format.h): a leap second, a quoted local part or an address literal.
inline bool format_outside_cellms_subset(std::string_view format, std::string_view text) {
  bool outside = false;
  if (format == "time") oracle_is_time(text, &outside);
  if (format == "date-time") oracle_is_date_time(text, &outside);
  if (format == "email") oracle_is_email(text, &outside);
  return outside;
}

}  // namespace cellm::testing
