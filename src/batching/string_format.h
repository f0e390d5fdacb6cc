// The JSON Schema string formats cellm asserts, as regular expressions in StringPattern's syntax
// (string_pattern.h): "date-time", "date", "time" and "duration" (RFC 3339 and its Appendix A),
// "uuid" (RFC 4122's text form, any version), "ipv4" (dotted decimal without leading zeros),
// "ipv6" (RFC 4291's text forms, an IPv4 tail included), "hostname" (RFC 1123 labels, at most 253
// characters), "email" (a dot-atom local part at a hostname, at most 254 characters) and "uri"
// (RFC 3986's grammar: scheme, authority with an IP literal or a registered name, path, query,
// fragment; percent-encoded octets, no other non-ASCII characters). Each
// expression matches a subset of the format's strings where the whole set is not a regular
// language a small automaton holds: calendar dates are exact (leap years included), but a time
// never has a leap second (":60" is valid only at 23:59 UTC), and an email's local part is a
// dot-atom, never a quoted string. Every string an expression matches is valid.
//
// Other formats ("uri-reference", "iri", "regex", ...) stay annotations, as JSON Schema 2020-12's
// default has every format: string_format() says which.
//
// It knows format names and their expressions, not JSON values, schemas or tokens. Called by
// JsonSchema's compiler. Thread-safety: a pure function over static tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cellm {

struct StringFormat {
  std::string pattern;  // anchored at both ends, ECMA-262 (string_pattern_syntax.h's subset)
  uint32_t max_length;  // code points; StringPattern::kUnbounded for none
};

// The expression of a format cellm asserts, or nullopt for one that stays an annotation.
std::optional<StringFormat> string_format(std::string_view name);

}  // namespace cellm
