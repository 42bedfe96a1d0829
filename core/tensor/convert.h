// Exact element-type conversions: the scalar codecs of every floating dtype, bulk conversions of
// contiguous runs to and from f32, and the rounding points of wan.md §1 (round_to).
//
// Every encoder rounds to nearest, ties to even, as PyTorch and ml_dtypes do. Signs survive
// everywhere (a tiny negative rounds to -0). What each format does with NaN and out-of-range
// values:
//   bf16     NaN -> sign|0x7FC0 (quiet, payload dropped, as ml_dtypes); overflow -> ±inf
//   f16      NaN -> sign|0x7E00|top payload bits (quiet; numpy keeps a signalling NaN
//            signalling, IEEE 754 and F16C hardware quiet it); overflow (|x| >= 65520) -> ±inf
//   e4m3fn   no inf. NaN, ±inf and every |x| > 464 (the tie between 448 and the 480 the format
//            lacks) -> sign|0x7F (NaN); 464 itself -> 448. This is PyTorch's
//            c10::detail::fp8e4m3fn_from_fp32_value (Float8_e4m3fn.h), and ml_dtypes agrees.
//            f32_to_f8e4m3_saturating instead clamps |x| > 448 (inf included) to ±448.
//   e5m2     NaN -> sign|0x7E (quiet, as ml_dtypes; PyTorch writes sign|0x7F, also a NaN);
//            overflow (|x| >= 61440) -> ±inf
// The decoders are exact. bf16 decodes by a shift, so its NaNs keep their bits (signalling ones
// too); f16, e4m3fn and e5m2 decode a NaN to a quiet NaN of the same sign, payload kept.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor/dtype.h"

namespace ferry {

float bf16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_bf16(float value);

float f16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_f16(float value);

float f8e4m3_to_f32(std::uint8_t bits);
std::uint8_t f32_to_f8e4m3(float value);
std::uint8_t f32_to_f8e4m3_saturating(float value);

float f8e5m2_to_f32(std::uint8_t bits);
std::uint8_t f32_to_f8e5m2(float value);

// n contiguous elements; src and dst may have any alignment (the void* sides byte-aligned).
// Integers and bool convert by value (bool: nonzero is 1), exactly where f32 can hold the value,
// else rounded to nearest even; F64 rounds to nearest even.
void convert_to_f32(DType from, const void* src, float* dst, std::size_t n);
// Floating targets only; an integer or bool `to` throws Error(kUnsupported). The F8E4M3 target
// is the PyTorch cast (f32_to_f8e4m3), not the saturating one.
void convert_from_f32(const float* src, DType to, void* dst, std::size_t n);

// The value after a round trip through `dtype` (identity for F32 and F64); an integer or bool
// dtype throws Error(kUnsupported).
float round_to(DType dtype, float value);

}  // namespace ferry
