// IEEE half (f16) and bfloat16 (bf16) conversions on the host, exact and portable.
//
// f16 → f32 and bf16 → f32 are exact. f32 → f16 and f32 → bf16 round to nearest, ties to even,
// keep infinities and turn NaNs into quiet NaNs. These are the bit rules every dequantization
// and the CPU reference rely on; no hardware intrinsics, so results match on every machine.
// Thread-safety: pure functions.
#pragma once

#include <bit>
#include <cstdint>

namespace cellm {

// Branch-light: the exponent is rebased by one float multiply (exact for every normal half), and
// subnormals come from a float subtraction that is exact too; NaN and infinity keep their bits.
inline float f16_to_f32(uint16_t h) {
  const uint32_t word = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = word & 0x80000000u;
  const uint32_t doubled = word + word;  // exponent and mantissa at the top, sign shifted out
  // Normal (and inf/NaN): place the 5-bit exponent in the f32 field with a bias of 224 instead of
  // 112, then scale by 2^-112; inf/NaN land at exponent 255 after the scale as well.
  const float normal =
      std::bit_cast<float>((doubled >> 4) + (0xe0u << 23)) * std::bit_cast<float>(0x7800000u);
  // Subnormal: 0.5 + m * 2^-24 built from bits (0.5 has a 2^-24 ulp), minus 0.5: exactly m * 2^-24.
  const float subnormal = std::bit_cast<float>((doubled >> 17) | (126u << 23)) - 0.5f;
  const uint32_t magnitude =
      doubled < (1u << 27) ? std::bit_cast<uint32_t>(subnormal) : std::bit_cast<uint32_t>(normal);
  return std::bit_cast<float>(sign | magnitude);
}

inline uint16_t f32_to_f16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;  // rounds to infinity (or is infinity)
  if (abs_bits < 0x38800000u) {
    // Result is subnormal or zero: f16 subnormal unit is 2^-24.
    if (abs_bits < 0x33000000u) return sign;  // below half the smallest subnormal
    const uint32_t exponent = abs_bits >> 23;
    const uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24 shifts the value into units of 2^-24
    uint32_t half = mantissa >> (shift);
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half & 1u))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t rounded = abs_bits + 0xfffu + ((abs_bits >> 13) & 1u);  // ties to even
  rounded -= (127u - 15u) << 23;
  return sign | static_cast<uint16_t>(rounded >> 13);
}

inline float bf16_to_f32(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t f32_to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace cellm
