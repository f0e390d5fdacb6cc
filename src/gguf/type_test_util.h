// Test helpers for the tensor-type tests: spelling out block bytes by hand and comparing rows.
//
// BlockBytes appends bytes the way a test author reads a format definition ("an f16 0x3c00, then
// 16 bytes of 0x0f"); expect_floats_eq compares whole rows exactly (NaN equals NaN) and reports
// the first few differing elements. Test-only; no knowledge of any format. Not thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

namespace cellm::testing {

class BlockBytes {
 public:
  BlockBytes& u8(std::initializer_list<uint8_t> values) {
    bytes_.insert(bytes_.end(), values.begin(), values.end());
    return *this;
  }
  BlockBytes& fill(size_t count, uint8_t value) {
    bytes_.insert(bytes_.end(), count, value);
    return *this;
  }
  BlockBytes& f16(uint16_t bits) {  // little-endian
    bytes_.push_back(static_cast<uint8_t>(bits & 0xff));
    bytes_.push_back(static_cast<uint8_t>(bits >> 8));
    return *this;
  }
  BlockBytes& u32(uint32_t bits) {  // little-endian
    for (int shift = 0; shift < 32; shift += 8)
      bytes_.push_back(static_cast<uint8_t>(bits >> shift));
    return *this;
  }
  // Overwrites the byte at `offset` from the start (a marker inside a filled range).
  BlockBytes& set(size_t offset, uint8_t value) {
    bytes_.at(offset) = value;
    return *this;
  }
  BlockBytes& append(const std::vector<uint8_t>& more) {
    bytes_.insert(bytes_.end(), more.begin(), more.end());
    return *this;
  }
  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// The expected values of a super-block whose sub-blocks (of `sub_block_size` elements) are
// constant, `base[s]` for sub-block s, except at the listed (element, value) markers.
inline std::vector<float> sub_block_values(
    std::span<const float> base, size_t sub_block_size,
    std::initializer_list<std::pair<size_t, float>> markers) {
  std::vector<float> values;
  for (float value : base) values.insert(values.end(), sub_block_size, value);
  for (const auto& [element, value] : markers) values.at(element) = value;
  return values;
}

// Exact comparison (NaN == NaN, -0 == +0); names up to 8 mismatching elements.
inline void expect_floats_eq(std::span<const float> actual, std::span<const float> expected) {
  ASSERT_EQ(actual.size(), expected.size());
  std::ostringstream mismatches;
  size_t num_mismatches = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const bool same =
        actual[i] == expected[i] || (std::isnan(actual[i]) && std::isnan(expected[i]));
    if (same) continue;
    if (++num_mismatches <= 8) {
      mismatches << "  element " << i << ": got " << actual[i] << ", expected " << expected[i]
                 << "\n";
    }
  }
  EXPECT_EQ(num_mismatches, 0u) << "mismatching elements:\n" << mismatches.str();
}

}  // namespace cellm::testing
