#include "batching/json_schema_satisfiable.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>

namespace cellm {

void prune_unsatisfiable(std::vector<JsonSchema::Node>& nodes) {
  using Node = JsonSchema::Node;
  std::vector<uint8_t> sat(nodes.size(), 0);
  const auto can = [&](int32_t n) {
    return n != JsonSchema::kNoNode && sat[static_cast<size_t>(n)] != 0;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      uint8_t mask = 0;
      if (!n.choices.empty()) {
        for (const int32_t c : n.choices) mask |= static_cast<uint8_t>(sat[static_cast<size_t>(c)]);
        mask &= n.types;
      } else if (!n.branch_by_type.empty()) {
        for (int t = 0; t < 6; ++t) {
          const int32_t b = n.branch_by_type[static_cast<size_t>(t)];
          if (b != JsonSchema::kNoNode && (sat[static_cast<size_t>(b)] & (1u << t)) != 0) {
            mask = static_cast<uint8_t>(mask | (1u << t));
          }
        }
      } else {
        mask = static_cast<uint8_t>(n.types & ~(kJsonObjectBit | kJsonArrayBit));
        if ((n.types & kJsonObjectBit) != 0) {
          bool all = true;
          uint32_t num_fillable = 0;
          for (size_t p = 0; p < n.properties.size(); ++p) {
            if (((n.required >> p) & 1) != 0) all = all && can(n.properties[p].node);
            num_fillable += can(n.properties[p].node) ? 1 : 0;
          }
          // Enough keys for minProperties: declared ones that can hold a value, or any others.
          all = all && (can(n.additional) || num_fillable >= n.min_properties);
          if (all || n.has_enum) mask |= kJsonObjectBit;
        }
        if ((n.types & kJsonArrayBit) != 0) {
          bool all = true;
          for (uint32_t k = 0; k < n.min_items && all; ++k) {
            all = can(k < n.prefix_items.size() ? n.prefix_items[k] : n.items);
          }
          if (all || n.has_enum) mask |= kJsonArrayBit;
        }
      }
      if (mask != sat[i]) {
        sat[i] = mask;
        changed = true;
      }
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    n.types = sat[i];
    std::erase_if(n.choices,
                  [&](int32_t c) { return (sat[static_cast<size_t>(c)] & n.types) == 0; });
    for (int t = 0; t < static_cast<int>(n.branch_by_type.size()); ++t) {
      if ((sat[i] & (1u << t)) == 0) n.branch_by_type[static_cast<size_t>(t)] = JsonSchema::kNoNode;
    }
    for (JsonSchema::Property& p : n.properties) {
      if (!can(p.node)) p.node = JsonSchema::kNoNode;
    }
    if (!can(n.additional)) n.additional = JsonSchema::kNoNode;
    if (!can(n.items)) n.items = JsonSchema::kNoNode;
    for (size_t k = 0; k < n.prefix_items.size(); ++k) {
      if (!can(n.prefix_items[k])) {
        n.max_items = std::min(n.max_items, static_cast<uint32_t>(k));
        break;
      }
    }
  }
}

bool told_apart(const JsonSchema& schema, int32_t a, int32_t b, uint8_t bit) {
  using Node = JsonSchema::Node;
  if (bit != kJsonObjectBit) return false;
  const Node& x = schema.node(a);
  const Node& y = schema.node(b);
  if (x.has_enum || y.has_enum || !x.choices.empty() || !y.choices.empty()) return false;
  for (size_t i = 0; i < x.properties.size(); ++i) {
    if (((x.required >> i) & 1) == 0 || x.properties[i].node < 0) continue;
    for (size_t j = 0; j < y.properties.size(); ++j) {
      if (y.properties[j].name != x.properties[i].name || ((y.required >> j) & 1) == 0 ||
          y.properties[j].node < 0) {
        continue;
      }
      const Node& u = schema.node(x.properties[i].node);
      const Node& v = schema.node(y.properties[j].node);
      if (!u.has_enum || !v.has_enum) continue;
      std::vector<std::string> both;
      std::set_intersection(u.enum_texts.begin(), u.enum_texts.end(), v.enum_texts.begin(),
                            v.enum_texts.end(), std::back_inserter(both));
      if (both.empty()) return true;
    }
  }
  return false;
}

}  // namespace cellm
