#include "batching/json_schema_bounds.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

namespace cellm {
namespace {

using Json = nlohmann::json;

Status error(const std::string& where, const std::string& what) {
  return invalid_argument(where + ": " + what);
}

// A count keyword: a non-negative integer, kept below kUnbounded.
StatusOr<uint32_t> count(const Json& value, const std::string& where, const char* keyword) {
  const bool non_negative = value.is_number_unsigned() ||
                            (value.is_number_integer() && value.get<int64_t>() >= 0) ||
                            (value.is_number_float() && value.get<double>() >= 0.0 &&
                             std::floor(value.get<double>()) == value.get<double>());
  if (!non_negative) {
    return error(where, std::string("\"") + keyword + "\" must be a non-negative integer");
  }
  const double v = value.get<double>();
  return v >= static_cast<double>(JsonSchema::kUnbounded - 1)
             ? JsonSchema::kUnbounded - 1
             : static_cast<uint32_t>(value.is_number_float() ? v : value.get<uint64_t>());
}

Status read_count(const Json& s, const char* keyword, uint32_t& out, const std::string& where) {
  if (!s.contains(keyword)) return ok_status();
  StatusOr<uint32_t> v = count(s.at(keyword), where, keyword);
  if (!v.ok()) return v.status();
  out = *v;
  return ok_status();
}

// An integer bound as an int64 (clamped: no integer the walker writes lies beyond); `up` rounds a
// fraction up (a minimum), else down (a maximum).
int64_t to_integer_bound(double value, bool up) {
  const double rounded = up ? std::ceil(value) : std::floor(value);
  if (rounded <= -9.2e18) return std::numeric_limits<int64_t>::min();
  if (rounded >= 9.2e18) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(rounded);
}

// Bounds on numbers that may have fractions: whole numbers only (then whether a prefix can still
// land within is exact decimal arithmetic on its integer part).
Status read_decimal_bounds(const Json& s, JsonSchema::Node& node, const std::string& where) {
  node.has_decimal_bounds = true;
  for (const char* keyword : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    if (!s.contains(keyword)) continue;
    const Json& v = s.at(keyword);
    // Within ±10^14: such numbers are written in at most 15 digits (a reader's double holds
    // them), and a value just inside an exclusive bound takes one more.
    const bool whole = (v.is_number_integer() ||
                        (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())) &&
                       std::fabs(v.get<double>()) < 1e14;
    if (!whole) {
      return error(where, std::string("\"") + keyword +
                              "\" on a number that may have a fraction must be a whole number "
                              "within ±10^14: fractional bounds are not supported");
    }
    const int64_t bound =
        v.is_number_float() ? static_cast<int64_t>(v.get<double>()) : v.get<int64_t>();
    const std::string name = keyword;
    if (name == "minimum" || name == "exclusiveMinimum") {
      const bool exclusive = name == "exclusiveMinimum";
      if (bound > node.decimal_min || (bound == node.decimal_min && exclusive)) {
        node.decimal_min = bound;
        node.decimal_min_exclusive = exclusive;
      }
    } else {
      const bool exclusive = name == "exclusiveMaximum";
      if (bound < node.decimal_max || (bound == node.decimal_max && exclusive)) {
        node.decimal_max = bound;
        node.decimal_max_exclusive = exclusive;
      }
    }
  }
  return ok_status();
}

Status read_integer_bounds(const Json& s, JsonSchema::Node& node, const std::string& where) {
  const char* const kKeywords[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  bool any = false;
  for (const char* keyword : kKeywords) {
    if (!s.contains(keyword)) continue;
    if (!s.at(keyword).is_number()) {
      return error(where, std::string("\"") + keyword + "\" must be a number");
    }
    any = true;
  }
  if (!any || (node.types & kJsonNumberBit) == 0) return ok_status();  // no number to bound
  if (!node.integer_only) return read_decimal_bounds(s, node, where);
  node.has_integer_bounds = true;
  const auto value = [&](const char* keyword) -> std::optional<Json> {
    if (!s.contains(keyword)) return std::nullopt;
    return s.at(keyword);
  };
  // An integer bound is exact as it is written; a fractional one rounds inward.
  const auto as_bound = [](const Json& v, bool up) {
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_unsigned()) return std::numeric_limits<int64_t>::max();
    return to_integer_bound(v.get<double>(), up);
  };
  const auto add_one = [](int64_t v, int64_t by) {
    if (by > 0 && v == std::numeric_limits<int64_t>::max()) return v;
    if (by < 0 && v == std::numeric_limits<int64_t>::min()) return v;
    return v + by;
  };
  if (auto v = value("minimum")) node.integer_min = std::max(node.integer_min, as_bound(*v, true));
  if (auto v = value("maximum")) node.integer_max = std::min(node.integer_max, as_bound(*v, false));
  if (auto v = value("exclusiveMinimum")) {
    const int64_t b = v->is_number_float() && std::ceil(v->get<double>()) != v->get<double>()
                          ? as_bound(*v, true)
                          : add_one(as_bound(*v, true), 1);
    node.integer_min = std::max(node.integer_min, b);
  }
  if (auto v = value("exclusiveMaximum")) {
    const int64_t b = v->is_number_float() && std::floor(v->get<double>()) != v->get<double>()
                          ? as_bound(*v, false)
                          : add_one(as_bound(*v, false), -1);
    node.integer_max = std::min(node.integer_max, b);
  }
  return ok_status();
}

}  // namespace

Status read_counts_and_bounds(const Json& s, JsonSchema::Node& node, const std::string& where) {
  for (const auto& [keyword, field] :
       {std::pair{"minLength", &node.min_length}, std::pair{"maxLength", &node.max_length},
        std::pair{"minItems", &node.min_items}, std::pair{"maxItems", &node.max_items},
        std::pair{"minProperties", &node.min_properties},
        std::pair{"maxProperties", &node.max_properties}}) {
    if (Status st = read_count(s, keyword, *field, where); !st.ok()) return st;
  }
  if (Status st = read_integer_bounds(s, node, where); !st.ok()) return st;
  const auto drop = [&](uint8_t bit, const char* why) -> Status {
    node.types &= static_cast<uint8_t>(~bit);
    return node.types == 0 ? error(where, why) : ok_status();
  };
  if (node.min_length > node.max_length) {
    if (Status st = drop(kJsonStringBit, "\"minLength\" is above \"maxLength\""); !st.ok()) {
      return st;
    }
  }
  if (node.min_items > node.max_items ||
      (node.items == JsonSchema::kNoNode && node.min_items > node.prefix_items.size())) {
    if (Status st = drop(kJsonArrayBit, "no array has as many items as \"minItems\" asks");
        !st.ok()) {
      return st;
    }
  }
  if (node.min_properties > node.max_properties ||
      static_cast<uint32_t>(std::popcount(node.required)) > node.max_properties) {
    if (Status st = drop(kJsonObjectBit, "no object has as many keys as it must"); !st.ok()) {
      return st;
    }
  }
  const bool no_decimal =
      node.has_decimal_bounds && (node.decimal_min > node.decimal_max ||
                                  (node.decimal_min == node.decimal_max &&
                                   (node.decimal_min_exclusive || node.decimal_max_exclusive)));
  if ((node.has_integer_bounds && node.integer_min > node.integer_max) || no_decimal) {
    if (Status st = drop(kJsonNumberBit, "no number lies within the bounds"); !st.ok()) return st;
  }
  return ok_status();
}

}  // namespace cellm
