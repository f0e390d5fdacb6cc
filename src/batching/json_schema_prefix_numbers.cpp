// JsonSchemaPrefix's numbers under bounds: whether digits can still be appended to what was written
// so as to land within the node's range, and whether it lies within now. Integers compare exactly
// on their magnitude; numbers that may have fractions have whole-number bounds and no exponent, so
// their integer part decides and the fraction matters only at a bound.
#include <cstdint>
#include <limits>

#include "batching/json_schema_prefix.h"

namespace cellm {

namespace {

// The magnitudes [*low, *high] of the integers of one sign within [lo, hi]; false when none.
bool magnitudes_within(bool negative, int64_t lo, int64_t hi, uint64_t* low, uint64_t* high) {
  // -(v + 1) + 1 is |v| for any negative v, INT64_MIN included.
  const auto magnitude = [](int64_t v) { return static_cast<uint64_t>(-(v + 1)) + 1; };
  if (!negative) {
    if (hi < 0) return false;
    *low = lo > 0 ? static_cast<uint64_t>(lo) : 0;
    *high = static_cast<uint64_t>(hi);
    return true;
  }
  if (lo > 0) return false;
  *low = hi >= 0 ? 0 : magnitude(hi);
  *high = magnitude(lo);
  return true;
}

// The magnitudes m of the numbers of one sign within decimal bounds: low ≤ m (or <) and m ≤ high
// (or <); false when there are none.
struct Magnitudes {
  uint64_t low;
  bool low_exclusive;
  uint64_t high;
  bool high_exclusive;
};
bool decimal_magnitudes(bool negative, const JsonSchema::Node& n, Magnitudes* m) {
  const auto magnitude = [](int64_t v) { return static_cast<uint64_t>(-(v + 1)) + 1; };  // v < 0
  const int64_t lo = n.decimal_min;
  const int64_t hi = n.decimal_max;
  if (!negative) {  // m = v
    if (hi < 0 || (hi == 0 && n.decimal_max_exclusive)) return false;
    *m = {lo > 0 ? static_cast<uint64_t>(lo) : 0, lo >= 0 && n.decimal_min_exclusive,
          static_cast<uint64_t>(hi), n.decimal_max_exclusive};
  } else {  // m = -v: v >= lo is m <= -lo, v <= hi is m >= -hi
    if (lo > 0 || (lo == 0 && n.decimal_min_exclusive)) return false;
    *m = {hi < 0 ? magnitude(hi) : 0, hi <= 0 && n.decimal_max_exclusive,
          lo < 0 ? magnitude(lo) : 0, n.decimal_min_exclusive};
  }
  return m->low < m->high || (m->low == m->high && !m->low_exclusive && !m->high_exclusive);
}

}  // namespace

// A bounded number with fractions has at most kMaxDecimalDigits digits, so that a reader's double
// holds it faithfully (a 15-digit decimal below a whole bound stays below it as a double; "0." and
// twenty 9s would read as 1).
constexpr int kMaxDecimalDigits = 15;

bool JsonSchemaPrefix::decimal_can_reach(const State& s) const {
  const JsonSchema::Node& node = schema_->node(s.number_node);
  if (!node.has_decimal_bounds) return true;
  Magnitudes m{};
  if (!decimal_magnitudes(s.number_negative, node, &m)) return false;
  if (s.number_digits == 0) return true;  // "-": any magnitude still (the bounds are < 10^14)
  const uint64_t whole = s.number_value;
  const int used = s.number_digits + s.fraction_digits;
  if (used > kMaxDecimalDigits) return false;
  const int room = kMaxDecimalDigits - used;  // digits still allowed
  if (s.number_fraction) {
    if (s.fraction_digits == 0 && room == 0) return false;  // "." needs a digit after it
    // whole.F and what more digits make: all below whole + 1. At the bound itself the fraction
    // decides: above an exclusive minimum takes a non-zero digit (written, or one still allowed).
    const bool above_low =
        whole > m.low || (whole == m.low && (!m.low_exclusive || s.fraction_nonzero || room > 0));
    const bool below_high =
        whole < m.high || (whole == m.high && !s.fraction_nonzero && !m.high_exclusive);
    return above_low && below_high;
  }
  // With k more whole digits (and room - k fraction digits) the value's whole part n lies in
  // [whole·10^k, (whole + 1)·10^k); the smallest such value not below the minimum must not pass the
  // maximum. "0" takes no more whole digits.
  uint64_t scale = 1;
  for (int k = 0; k <= room; ++k) {
    if (whole == 0 && k > 0) return false;
    const uint64_t first = whole * scale;
    const uint64_t top = (whole + 1) * scale;  // whole parts below it
    const int fraction_room = room - k;
    uint64_t n = first;    // the smallest value's whole part
    bool above_n = false;  // ... and whether it is n plus a fraction
    if (first <= m.low) {
      if (!m.low_exclusive) {
        n = m.low;
      } else if (fraction_room > 0) {
        n = m.low;
        above_n = true;
      } else {
        n = m.low + 1;
      }
    }
    const bool fits = n < top && (m.high_exclusive || above_n ? n < m.high : n <= m.high);
    if (fits) return true;
    if (first > m.high || (first == m.high && m.high_exclusive)) return false;
    scale *= 10;
  }
  return false;
}

bool JsonSchemaPrefix::number_within(const State& s) const {
  if (s.number_node == JsonSchema::kNoNode) return true;
  const JsonSchema::Node& node = schema_->node(s.number_node);
  if (node.has_decimal_bounds && !s.integer_only) {
    Magnitudes m{};
    if (s.number_digits == 0 || !decimal_magnitudes(s.number_negative, node, &m)) return false;
    if (s.number_digits + s.fraction_digits > kMaxDecimalDigits) return false;
    const uint64_t whole = s.number_value;
    const bool fraction = s.fraction_nonzero;
    const bool above_low =
        m.low_exclusive ? whole > m.low || (whole == m.low && fraction) : whole >= m.low;
    const bool below_high =
        m.high_exclusive ? whole < m.high : whole < m.high || (whole == m.high && !fraction);
    return above_low && below_high;
  }
  if (!node.has_integer_bounds) return true;
  uint64_t low = 0;
  uint64_t high = 0;
  return s.number_digits > 0 &&
         magnitudes_within(s.number_negative, node.integer_min, node.integer_max, &low, &high) &&
         s.number_value >= low && s.number_value <= high;
}

bool JsonSchemaPrefix::integer_can_reach(const State& s) const {
  const JsonSchema::Node& node = schema_->node(s.number_node);
  if (!node.has_integer_bounds) return true;
  uint64_t low = 0;
  uint64_t high = 0;
  if (!magnitudes_within(s.number_negative, node.integer_min, node.integer_max, &low, &high)) {
    // "-0" is 0, which lies within when the non-negative side holds it.
    return s.number_negative && s.number_value == 0 && node.integer_min <= 0 &&
           node.integer_max >= 0;
  }
  if (s.number_digits == 0) return true;     // "-": any magnitude still
  if (s.number_value == 0) return low == 0;  // "0" or "-0": nothing may follow
  // With k more digits the magnitude lies in [value·10^k, value·10^k + 10^k - 1].
  uint64_t scale = 1;
  for (int k = 0; s.number_digits + k <= 19; ++k) {
    if (s.number_value > high / scale) return false;  // value·10^k > high
    const uint64_t first = s.number_value * scale;
    const uint64_t last = scale - 1 > std::numeric_limits<uint64_t>::max() - first
                              ? std::numeric_limits<uint64_t>::max()
                              : first + scale - 1;
    if (last >= low) return true;
    if (scale > std::numeric_limits<uint64_t>::max() / 10) return false;
    scale *= 10;
  }
  return false;
}

}  // namespace cellm
