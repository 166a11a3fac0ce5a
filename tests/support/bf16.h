// bfloat16 <-> float conversions for the GPU tests' host-side data and references
// (round to nearest even; NaN inputs are not used).
#pragma once

#include <cstdint>
#include <cstring>

namespace kjit::test {

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float bf16_to_f32(uint16_t b) {
  const uint32_t x = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace kjit::test
