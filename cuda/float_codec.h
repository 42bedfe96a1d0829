// The element codecs of core/tensor/convert.cpp, written once for host and device: the CUDA
// kernels read and write bf16, f16 and fp8 through these, and tests/cuda/cuda_host_test.cpp
// checks them bit for bit against core/tensor/convert.h on the CPU. Same algorithms (integer
// rounding adds, the float "magic number" add for subnormals), same NaN and overflow rules.
//
// Plain C++ when a host compiler includes it; __host__ __device__ under nvcc. The subnormal path
// relies on IEEE float addition with denormals kept: never build the kernels with
// --use_fast_math or -ftz=true.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FERRY_HD __host__ __device__ __forceinline__
#else
#define FERRY_HD inline
#endif

namespace ferry::cuda::codec {

FERRY_HD std::uint32_t bits_of(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

FERRY_HD float float_of(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

inline constexpr std::uint32_t kF32Inf = 0x7F800000;

// A sign, kExp exponent bits, kMan mantissa bits, IEEE subnormals (f16, e4m3fn, e5m2).
template <int kExp, int kMan>
struct NarrowFloat {
  static constexpr std::uint32_t kBias = (1u << (kExp - 1)) - 1;
  static constexpr int kShift = 23 - kMan;
  static constexpr int kSignShift = kExp + kMan;
  static constexpr std::uint32_t kAbsMask = (1u << (kExp + kMan)) - 1;
  static constexpr std::uint32_t kManMask = (1u << kMan) - 1;
  static constexpr std::uint32_t kMinNormalF32 = (127 - kBias + 1) << 23;
  static constexpr std::uint32_t kMagicF32 = (127 + 24 - kBias - kMan) << 23;
  static constexpr std::uint32_t kRebiasRound = (1u << (kShift - 1)) - 1 - ((127 - kBias) << 23);

  FERRY_HD static std::uint32_t encode_finite(std::uint32_t abs_bits) {
    const std::uint32_t normal = (abs_bits + kRebiasRound + ((abs_bits >> kShift) & 1)) >> kShift;
    const float shifted = float_of(abs_bits) + float_of(kMagicF32);
    const std::uint32_t subnormal = bits_of(shifted) - kMagicF32;
    return abs_bits < kMinNormalF32 ? subnormal : normal;
  }

  FERRY_HD static std::uint32_t decode_finite(std::uint32_t abs_code) {
    const std::uint32_t normal = (abs_code << kShift) + ((127 - kBias) << 23);
    const float subnormal = float_of(kMagicF32 | (abs_code & kManMask)) - float_of(kMagicF32);
    return abs_code <= kManMask ? bits_of(subnormal) : normal;
  }

  // IEEE-like formats (f16, e5m2): all-ones exponent is inf or a NaN (quieted, payload kept).
  FERRY_HD static float decode_ieee(std::uint32_t code) {
    const std::uint32_t sign = (code >> kSignShift) << 31;
    const std::uint32_t abs_code = code & kAbsMask;
    const std::uint32_t inf_code = kAbsMask & ~kManMask;
    const std::uint32_t quiet = abs_code > inf_code ? 0x00400000u : 0u;
    const std::uint32_t special = kF32Inf | quiet | ((abs_code & kManMask) << kShift);
    const std::uint32_t r = abs_code >= inf_code ? special : decode_finite(abs_code);
    return float_of(sign | r);
  }

  // kOverflowF32: f32 bits of the smallest magnitude that rounds past the largest finite code.
  FERRY_HD static std::uint32_t encode_ieee(float value, std::uint32_t overflow_f32,
                                            std::uint32_t quiet_nan) {
    const std::uint32_t bits = bits_of(value);
    const std::uint32_t abs_bits = bits & 0x7FFFFFFFu;
    const std::uint32_t inf_code = kAbsMask & ~kManMask;
    std::uint32_t r = encode_finite(abs_bits);
    r = abs_bits >= overflow_f32 ? inf_code : r;
    r = abs_bits > kF32Inf ? quiet_nan : r;
    return ((bits >> 31) << kSignShift) | r;
  }
};

using F16 = NarrowFloat<5, 10>;
using E4M3 = NarrowFloat<4, 3>;
using E5M2 = NarrowFloat<5, 2>;

FERRY_HD float decode_bf16(std::uint32_t code) {
  return float_of(code << 16);
}

FERRY_HD std::uint16_t encode_bf16(float value) {
  const std::uint32_t bits = bits_of(value);
  const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const std::uint32_t nan = ((bits >> 16) & 0x8000u) | 0x7FC0u;
  return static_cast<std::uint16_t>((bits & 0x7FFFFFFFu) > kF32Inf ? nan : rounded);
}

FERRY_HD float decode_f16(std::uint32_t code) {
  return F16::decode_ieee(code);
}

FERRY_HD std::uint16_t encode_f16(float value) {
  const std::uint32_t payload = (bits_of(value) >> F16::kShift) & F16::kManMask;
  return static_cast<std::uint16_t>(F16::encode_ieee(value, 0x477FF000u, 0x7E00u | payload));
}

FERRY_HD float decode_e5m2(std::uint32_t code) {
  return E5M2::decode_ieee(code);
}

FERRY_HD std::uint8_t encode_e5m2(float value) {
  return static_cast<std::uint8_t>(E5M2::encode_ieee(value, 0x47700000u, 0x7Eu));
}

FERRY_HD float decode_e4m3(std::uint32_t code) {
  const std::uint32_t sign = (code >> 7) << 31;
  const std::uint32_t abs_code = code & 0x7Fu;
  const std::uint32_t r = abs_code == 0x7Fu ? 0x7FC00000u : E4M3::decode_finite(abs_code);
  return float_of(sign | r);
}

// The PyTorch cast (not saturating): every |x| > 464, inf and NaN become NaN (0x7F).
FERRY_HD std::uint8_t encode_e4m3(float value) {
  const std::uint32_t bits = bits_of(value);
  const std::uint32_t abs_bits = bits & 0x7FFFFFFFu;
  std::uint32_t r = E4M3::encode_finite(abs_bits);
  r = abs_bits > 0x43E80000u ? 0x7Fu : r;
  return static_cast<std::uint8_t>(((bits >> 31) << 7) | r);
}

// The T5 relative-position bucket (wan.md §A.2) with the CPU backend's float32 math. The
// logarithm is taken in double and rounded once to float (a correctly rounded logf in effect),
// so host and device agree at the exact boundaries a = 16, 32, 64; log16 is the host's
// static_cast<float>(std::log(16.0)), passed in rather than recomputed.
FERRY_HD int t5_bucket(std::int64_t relative_position, float log16) {
  const int base = relative_position > 0 ? 16 : 0;
  const std::int64_t a = relative_position < 0 ? -relative_position : relative_position;
  if (a < 8) return base + static_cast<int>(a);
  const float ratio = static_cast<float>(a) / 8.0f;
#if defined(__CUDA_ARCH__)
  const float log_ratio = static_cast<float>(::log(static_cast<double>(ratio)));
#else
  const float log_ratio = static_cast<float>(std::log(static_cast<double>(ratio)));
#endif
  const float scaled = log_ratio / log16 * 8.0f;
  const int b = 8 + static_cast<int>(scaled);
  return base + (b < 15 ? b : 15);
}

}  // namespace ferry::cuda::codec
