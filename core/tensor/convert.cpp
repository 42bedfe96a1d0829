#include "core/tensor/convert.h"

#include <bit>
#include <cstring>
#include <string>

#include "core/error.h"

namespace ferry {
namespace {

// c ? a : b by masks. Where a comes from a float operation this keeps it out of a branch: with
// the default -ftrapping-math GCC will not if-convert (so not vectorise) a branch holding one.
inline std::uint32_t select(bool c, std::uint32_t a, std::uint32_t b) {
  const std::uint32_t mask = 0u - static_cast<std::uint32_t>(c);
  return (a & mask) | (b & ~mask);
}

// The finite part of f16, e4m3fn and e5m2: a sign, kExp exponent bits, kMan mantissa bits, IEEE
// subnormals; what each does at the top of its range is left to its own encoder and decoder.
// Branch-free (selects, not ifs) so the bulk loops vectorise. The float add and subtract run in
// the default rounding mode and never see or make an f32 subnormal that matters, so FTZ/DAZ
// settings of the calling thread do not change the results.
template <int kExp, int kMan>
struct NarrowFloat {
  static constexpr std::uint32_t kBias = (1u << (kExp - 1)) - 1;
  static constexpr int kShift = 23 - kMan;  // mantissa bits f32 has beyond the format's
  static constexpr int kSignShift = kExp + kMan;
  static constexpr std::uint32_t kAbsMask = (1u << (kExp + kMan)) - 1;
  static constexpr std::uint32_t kManMask = (1u << kMan) - 1;
  // f32 bits of the smallest normal of the format.
  static constexpr std::uint32_t kMinNormalF32 = (127 - kBias + 1) << 23;
  // 2^(24 - bias - kMan): an f32 whose ULP is the format's smallest subnormal, so adding it
  // rounds to a subnormal (to nearest even, in hardware) and subtracting it decodes one.
  static constexpr std::uint32_t kMagicF32 = (127 + 24 - kBias - kMan) << 23;
  // The difference of the exponent biases, in place in f32 bits.
  static constexpr std::uint32_t kRebias = (127 - kBias) << 23;
  // Half an ULP of the format less one: with the ULP's own parity added, rounds to nearest even.
  static constexpr std::uint32_t kHalfUlpLess1 = (1u << (kShift - 1)) - 1;

  // The code's magnitude (no sign), without the out-of-range and NaN rules.
  static std::uint32_t encode_finite(std::uint32_t abs_bits) {
    // (Below the normal range the subtraction wraps; that lane is not selected.)
    const std::uint32_t odd = (abs_bits >> kShift) & 1;
    const std::uint32_t normal = (abs_bits - kRebias + kHalfUlpLess1 + odd) >> kShift;
    const float shifted = std::bit_cast<float>(abs_bits) + std::bit_cast<float>(kMagicF32);
    const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(shifted) - kMagicF32;
    return select(abs_bits < kMinNormalF32, subnormal, normal);
  }

  // f32 bits of a finite code magnitude.
  static std::uint32_t decode_finite(std::uint32_t abs_code) {
    const std::uint32_t normal = (abs_code << kShift) + kRebias;
    const float subnormal =
        std::bit_cast<float>(kMagicF32 | (abs_code & kManMask)) - std::bit_cast<float>(kMagicF32);
    return select(abs_code <= kManMask, std::bit_cast<std::uint32_t>(subnormal), normal);
  }
};

std::uint32_t f32_bits(float value) {
  return std::bit_cast<std::uint32_t>(value);
}

constexpr std::uint32_t kF32Inf = 0x7F800000;

using F16 = NarrowFloat<5, 10>;
using E4M3 = NarrowFloat<4, 3>;
using E5M2 = NarrowFloat<5, 2>;

// IEEE-like formats (f16, e5m2): all-ones exponent is inf (zero mantissa) or NaN.
template <class F>
float decode_ieee(std::uint32_t code) {
  const std::uint32_t sign = (code >> F::kSignShift) << 31;
  const std::uint32_t abs_code = code & F::kAbsMask;
  constexpr std::uint32_t kInfCode = F::kAbsMask & ~F::kManMask;
  // inf, or a NaN made quiet with its payload kept
  const std::uint32_t quiet = select(abs_code > kInfCode, 0x00400000, 0);
  const std::uint32_t special = kF32Inf | quiet | ((abs_code & F::kManMask) << F::kShift);
  const std::uint32_t r = select(abs_code >= kInfCode, special, F::decode_finite(abs_code));
  return std::bit_cast<float>(sign | r);
}

// kOverflowF32: f32 bits of the smallest magnitude that rounds past the largest finite code.
template <class F, std::uint32_t kOverflowF32>
std::uint32_t encode_ieee(float value, std::uint32_t quiet_nan) {
  const std::uint32_t bits = f32_bits(value);
  const std::uint32_t abs_bits = bits & 0x7FFFFFFF;
  constexpr std::uint32_t kInfCode = F::kAbsMask & ~F::kManMask;
  std::uint32_t r = F::encode_finite(abs_bits);
  r = select(abs_bits >= kOverflowF32, kInfCode, r);
  r = select(abs_bits > kF32Inf, quiet_nan, r);
  return ((bits >> 31) << F::kSignShift) | r;
}

constexpr std::uint32_t kE4M3Nan = 0x7F;
constexpr std::uint32_t kE4M3Max = 0x7E;  // 448
constexpr std::uint32_t kF32Of448 = 0x43E00000;
constexpr std::uint32_t kF32Of464 = 0x43E80000;  // halfway between 448 and 480

std::uint16_t encode_f16(float value) {
  const std::uint32_t payload = (f32_bits(value) >> F16::kShift) & F16::kManMask;
  return static_cast<std::uint16_t>(encode_ieee<F16, 0x477FF000>(value, 0x7E00 | payload));
}

std::uint8_t encode_e5m2(float value) {
  return static_cast<std::uint8_t>(encode_ieee<E5M2, 0x47700000>(value, 0x7E));
}

std::uint8_t encode_e4m3(float value) {
  const std::uint32_t bits = f32_bits(value);
  const std::uint32_t abs_bits = bits & 0x7FFFFFFF;
  std::uint32_t r = E4M3::encode_finite(abs_bits);
  r = select(abs_bits > kF32Of464, kE4M3Nan, r);  // also inf and NaN
  return static_cast<std::uint8_t>(((bits >> 31) << 7) | r);
}

std::uint8_t encode_e4m3_saturating(float value) {
  const std::uint32_t bits = f32_bits(value);
  const std::uint32_t abs_bits = bits & 0x7FFFFFFF;
  std::uint32_t r = E4M3::encode_finite(abs_bits);
  r = select(abs_bits > kF32Of448, kE4M3Max, r);
  r = select(abs_bits > kF32Inf, kE4M3Nan, r);
  return static_cast<std::uint8_t>(((bits >> 31) << 7) | r);
}

float decode_e4m3(std::uint32_t code) {
  const std::uint32_t sign = (code >> 7) << 31;
  const std::uint32_t abs_code = code & 0x7F;
  const std::uint32_t r = select(abs_code == kE4M3Nan, 0x7FC00000, E4M3::decode_finite(abs_code));
  return std::bit_cast<float>(sign | r);
}

float decode_bf16(std::uint32_t code) {
  return std::bit_cast<float>(code << 16);
}

std::uint16_t encode_bf16(float value) {
  // bf16 is f32 with 16 mantissa bits dropped, subnormals included: one rounding add.
  const std::uint32_t bits = f32_bits(value);
  const std::uint32_t rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16;
  const std::uint32_t nan = ((bits >> 16) & 0x8000) | 0x7FC0;
  return static_cast<std::uint16_t>((bits & 0x7FFFFFFF) > kF32Inf ? nan : rounded);
}

// The bulk loops read and write the void* side through memcpy: any alignment is allowed and the
// compiler still emits plain (vector) loads.
template <class Code, class Decode>
void decode_run(const void* src, float* dst, std::size_t n, Decode decode) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  for (std::size_t i = 0; i < n; ++i) {
    Code code;
    std::memcpy(&code, bytes + i * sizeof(Code), sizeof(Code));
    dst[i] = decode(code);
  }
}

template <class Code, class Encode>
void encode_run(const float* src, void* dst, std::size_t n, Encode encode) {
  auto* bytes = static_cast<unsigned char*>(dst);
  for (std::size_t i = 0; i < n; ++i) {
    const Code code = encode(src[i]);
    std::memcpy(bytes + i * sizeof(Code), &code, sizeof(Code));
  }
}

[[noreturn]] void throw_no_rounding_rule(DType to) {
  throw Error(ErrorCode::kUnsupported,
              "cannot convert f32 to " + std::string(dtype_name(to)) +
                  ": Ferry has no rounding rule for integer element types");
}

}  // namespace

float bf16_to_f32(std::uint16_t bits) {
  return decode_bf16(bits);
}
std::uint16_t f32_to_bf16(float value) {
  return encode_bf16(value);
}

float f16_to_f32(std::uint16_t bits) {
  return decode_ieee<F16>(bits);
}
std::uint16_t f32_to_f16(float value) {
  return encode_f16(value);
}

float f8e4m3_to_f32(std::uint8_t bits) {
  return decode_e4m3(bits);
}
std::uint8_t f32_to_f8e4m3(float value) {
  return encode_e4m3(value);
}
std::uint8_t f32_to_f8e4m3_saturating(float value) {
  return encode_e4m3_saturating(value);
}

float f8e5m2_to_f32(std::uint8_t bits) {
  return decode_ieee<E5M2>(bits);
}
std::uint8_t f32_to_f8e5m2(float value) {
  return encode_e5m2(value);
}

// Block types are dequantised a block at a time by the backends (cpu/quant_blocks.h), never
// element by element here.
[[noreturn]] void throw_blocked(DType dtype) {
  throw Error(ErrorCode::kUnsupported, "no element-wise conversion for the block type " +
                                           std::string(dtype_name(dtype)));
}

void convert_to_f32(DType from, const void* src, float* dst, std::size_t n) {
  if (n == 0) return;
  switch (from) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF64:
      return decode_run<double>(src, dst, n, [](double v) { return static_cast<float>(v); });
    case DType::kF16:
      return decode_run<std::uint16_t>(src, dst, n,
                                       [](std::uint16_t c) { return decode_ieee<F16>(c); });
    case DType::kBF16:
      return decode_run<std::uint16_t>(src, dst, n, [](std::uint16_t c) { return decode_bf16(c); });
    case DType::kF8E4M3:
      return decode_run<std::uint8_t>(src, dst, n, [](std::uint8_t c) { return decode_e4m3(c); });
    case DType::kF8E5M2:
      return decode_run<std::uint8_t>(src, dst, n,
                                      [](std::uint8_t c) { return decode_ieee<E5M2>(c); });
    case DType::kI64:
      return decode_run<std::int64_t>(src, dst, n,
                                      [](std::int64_t v) { return static_cast<float>(v); });
    case DType::kI32:
      return decode_run<std::int32_t>(src, dst, n,
                                      [](std::int32_t v) { return static_cast<float>(v); });
    case DType::kI16:
      return decode_run<std::int16_t>(src, dst, n,
                                      [](std::int16_t v) { return static_cast<float>(v); });
    case DType::kI8:
      return decode_run<std::int8_t>(src, dst, n,
                                     [](std::int8_t v) { return static_cast<float>(v); });
    case DType::kU8:
      return decode_run<std::uint8_t>(src, dst, n,
                                      [](std::uint8_t v) { return static_cast<float>(v); });
    case DType::kBool:
      return decode_run<std::uint8_t>(src, dst, n,
                                      [](std::uint8_t v) { return v != 0 ? 1.0f : 0.0f; });
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kBnb4:
      throw_blocked(from);
  }
  throw Error(ErrorCode::kInternal, "convert_to_f32: unknown dtype");
}

void convert_from_f32(const float* src, DType to, void* dst, std::size_t n) {
  switch (to) {
    case DType::kF32:
      if (n != 0) std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF64:
      return encode_run<double>(src, dst, n, [](float v) { return static_cast<double>(v); });
    case DType::kF16:
      return encode_run<std::uint16_t>(src, dst, n, [](float v) { return encode_f16(v); });
    case DType::kBF16:
      return encode_run<std::uint16_t>(src, dst, n, [](float v) { return encode_bf16(v); });
    case DType::kF8E4M3:
      return encode_run<std::uint8_t>(src, dst, n, [](float v) { return encode_e4m3(v); });
    case DType::kF8E5M2:
      return encode_run<std::uint8_t>(src, dst, n, [](float v) { return encode_e5m2(v); });
    case DType::kI64:
    case DType::kI32:
    case DType::kI16:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      throw_no_rounding_rule(to);
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kBnb4:
      throw_blocked(to);
  }
  throw Error(ErrorCode::kInternal, "convert_from_f32: unknown dtype");
}

float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF64:
      return value;
    case DType::kF16:
      return decode_ieee<F16>(encode_f16(value));
    case DType::kBF16:
      return decode_bf16(encode_bf16(value));
    case DType::kF8E4M3:
      return decode_e4m3(encode_e4m3(value));
    case DType::kF8E5M2:
      return decode_ieee<E5M2>(encode_e5m2(value));
    case DType::kI64:
    case DType::kI32:
    case DType::kI16:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      throw_no_rounding_rule(dtype);
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kBnb4:
      throw_blocked(dtype);
  }
  throw Error(ErrorCode::kInternal, "round_to: unknown dtype");
}

}  // namespace ferry
