// Element-type conversions. Every code of every narrow float format is decoded against the
// format's definition (sign, exponent, mantissa, std::ldexp in double); the encoders are checked
// against a nearest-value oracle built on that decoding, at every tie point and on random floats;
// and both against ml_dtypes / numpy through tests/data/convert/
// (tools/reference/make_convert_reference.py).
#include "core/tensor/convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/test_support.h"

namespace ferry {
namespace {

std::uint32_t bits_of(float x) {
  return std::bit_cast<std::uint32_t>(x);
}
float float_of(std::uint32_t bits) {
  return std::bit_cast<float>(bits);
}

std::string hex(std::uint64_t v) {
  std::ostringstream out;
  out << "0x" << std::hex << v;
  return out.str();
}

// ---- the formats as the oracles see them ----

enum class Overflow { kInf, kNan, kSaturate };

struct Format {
  const char* name;
  int exp_bits;
  int man_bits;
  bool ieee_specials;  // an all-ones exponent is inf or NaN; else (e4m3fn) only S.1111.111 is NaN
  Overflow overflow;
  std::uint32_t (*encode)(float);
  float (*decode)(std::uint32_t);
  // The code convert.h documents for a NaN input with these f32 bits.
  std::uint32_t (*nan_code)(std::uint32_t f32_bits);

  std::uint32_t sign_bit() const { return 1u << (exp_bits + man_bits); }
  std::uint32_t code_count() const { return sign_bit() << 1; }
  std::uint32_t man_mask() const { return (1u << man_bits) - 1; }
};

const Format kBF16{"bf16",
                   8,
                   7,
                   true,
                   Overflow::kInf,
                   [](float x) -> std::uint32_t { return f32_to_bf16(x); },
                   [](std::uint32_t c) { return bf16_to_f32(static_cast<std::uint16_t>(c)); },
                   [](std::uint32_t b) -> std::uint32_t { return ((b >> 16) & 0x8000) | 0x7FC0; }};
const Format kF16{"f16",
                  5,
                  10,
                  true,
                  Overflow::kInf,
                  [](float x) -> std::uint32_t { return f32_to_f16(x); },
                  [](std::uint32_t c) { return f16_to_f32(static_cast<std::uint16_t>(c)); },
                  [](std::uint32_t b) -> std::uint32_t {
                    return ((b >> 16) & 0x8000) | 0x7E00 | ((b >> 13) & 0x3FF);
                  }};
const Format kE4M3{"e4m3fn",
                   4,
                   3,
                   false,
                   Overflow::kNan,
                   [](float x) -> std::uint32_t { return f32_to_f8e4m3(x); },
                   [](std::uint32_t c) { return f8e4m3_to_f32(static_cast<std::uint8_t>(c)); },
                   [](std::uint32_t b) -> std::uint32_t { return ((b >> 24) & 0x80) | 0x7F; }};
const Format kE4M3Saturating{
    "e4m3fn saturating",
    4,
    3,
    false,
    Overflow::kSaturate,
    [](float x) -> std::uint32_t { return f32_to_f8e4m3_saturating(x); },
    [](std::uint32_t c) { return f8e4m3_to_f32(static_cast<std::uint8_t>(c)); },
    [](std::uint32_t b) -> std::uint32_t { return ((b >> 24) & 0x80) | 0x7F; }};
const Format kE5M2{"e5m2",
                   5,
                   2,
                   true,
                   Overflow::kInf,
                   [](float x) -> std::uint32_t { return f32_to_f8e5m2(x); },
                   [](std::uint32_t c) { return f8e5m2_to_f32(static_cast<std::uint8_t>(c)); },
                   [](std::uint32_t b) -> std::uint32_t { return ((b >> 24) & 0x80) | 0x7E; }};

const Format* const kDecodeFormats[] = {&kBF16, &kF16, &kE4M3, &kE5M2};
const Format* const kEncodeFormats[] = {&kBF16, &kF16, &kE4M3, &kE4M3Saturating, &kE5M2};

// ---- decode oracle: the format's definition, in double ----

enum class Kind { kFinite, kInf, kNan };

struct Decoded {
  Kind kind;
  bool negative;
  double value;  // signed, -0.0 included
};

Decoded oracle_decode(const Format& f, std::uint32_t code) {
  const bool negative = (code & f.sign_bit()) != 0;
  const std::uint32_t exp_ones = (1u << f.exp_bits) - 1;
  const std::uint32_t exponent = (code >> f.man_bits) & exp_ones;
  const std::uint32_t mantissa = code & f.man_mask();
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  if (exponent == exp_ones && f.ieee_specials) {
    return {mantissa == 0 ? Kind::kInf : Kind::kNan, negative, 0.0};
  }
  if (exponent == exp_ones && mantissa == f.man_mask()) return {Kind::kNan, negative, 0.0};
  const double magnitude = exponent == 0
                               ? std::ldexp(static_cast<double>(mantissa), 1 - bias - f.man_bits)
                               : std::ldexp(static_cast<double>(mantissa + (1u << f.man_bits)),
                                            static_cast<int>(exponent) - bias - f.man_bits);
  return {Kind::kFinite, negative, negative ? -magnitude : magnitude};
}

// ---- encode oracle: the nearest representable value, ties to the even code ----

class EncodeOracle {
 public:
  explicit EncodeOracle(const Format& f) : f_(f) {
    for (std::uint32_t code = 0; code < f.sign_bit(); ++code) {
      const Decoded d = oracle_decode(f, code);
      if (d.kind != Kind::kFinite) break;
      values_.push_back(d.value);  // positive codes grow with their value
    }
    // The value one code past the largest would have with an unbounded exponent: where rounding
    // overflows.
    beyond_ = values_.back() + (values_.back() - values_[values_.size() - 2]);
  }

  const std::vector<double>& values() const { return values_; }
  double beyond() const { return beyond_; }
  std::uint32_t max_code() const { return static_cast<std::uint32_t>(values_.size() - 1); }

  std::uint32_t encode(float x) const {
    if (std::isnan(x)) return f_.nan_code(bits_of(x));
    const std::uint32_t sign = std::signbit(x) ? f_.sign_bit() : 0;
    const double a = std::fabs(static_cast<double>(x));
    std::uint32_t pick = max_code() + 1;
    if (a < beyond_) {
      // The largest code whose value is <= a, and the value above it.
      const auto it = std::upper_bound(values_.begin(), values_.end(), a);
      const auto lo = static_cast<std::uint32_t>(it - values_.begin() - 1);
      const double hi_value = lo < max_code() ? values_[lo + 1] : beyond_;
      const double mid = (values_[lo] + hi_value) / 2;  // exact: one bit more than the format
      pick = (a > mid || (a == mid && (lo & 1) != 0)) ? lo + 1 : lo;
    }
    if (pick <= max_code()) return sign | pick;
    switch (f_.overflow) {
      case Overflow::kInf:
        return sign | (((1u << f_.exp_bits) - 1) << f_.man_bits);
      case Overflow::kNan:
        return sign | (f_.sign_bit() - 1);
      case Overflow::kSaturate:
        return sign | max_code();
    }
    return 0;
  }

 private:
  const Format& f_;
  std::vector<double> values_;
  double beyond_ = 0;
};

// The f32 inputs the encode tests use for a format: every value, every tie point with its
// neighbours, the edges of the ranges, specials, and `random_count` random floats.
std::vector<float> encode_inputs(const EncodeOracle& oracle, std::size_t random_count) {
  std::vector<float> in;
  const std::vector<double>& values = oracle.values();
  for (std::size_t i = 0; i < values.size(); ++i) {
    in.push_back(static_cast<float>(values[i]));
    const double next = i + 1 < values.size() ? values[i + 1] : oracle.beyond();
    const double mid = (values[i] + next) / 2;
    const auto mid32 = static_cast<float>(mid);
    EXPECT_EQ(static_cast<double>(mid32), mid) << "a tie point is not a float";
    in.push_back(std::nextafter(mid32, 0.0f));
    in.push_back(mid32);
    in.push_back(std::nextafter(mid32, std::numeric_limits<float>::infinity()));
  }
  const auto beyond = static_cast<float>(oracle.beyond());
  const float inf = std::numeric_limits<float>::infinity();
  for (const float x : {beyond, std::nextafter(beyond, 0.0f), std::nextafter(beyond, inf),
                        2 * beyond, std::numeric_limits<float>::max(), inf,
                        std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                        float_of(0x007FFFFF), 0.0f, 1.0f, std::nextafter(1.0f, 2.0f),
                        std::nextafter(1.0f, 0.0f), std::numeric_limits<float>::quiet_NaN(),
                        float_of(0x7F800001), float_of(0x7FBFFFFF), float_of(0x7FC12345)}) {
    in.push_back(x);
  }
  std::mt19937 rng(20240611);
  const auto min_exp =
      static_cast<std::uint32_t>(std::max(1, std::ilogb(static_cast<float>(values[1])) + 127 - 3));
  const auto max_exp =
      static_cast<std::uint32_t>(std::min(254, std::ilogb(oracle.beyond()) + 127 + 2));
  for (std::size_t i = 0; i < random_count; ++i) {
    const std::uint32_t r = rng();
    if (i % 2 == 0) {
      in.push_back(float_of(r & 0x7FFFFFFF));  // any exponent, NaNs included
    } else {
      // the format's own range, from below its smallest subnormal to past its overflow
      const std::uint32_t exponent = min_exp + rng() % (max_exp - min_exp + 1);
      in.push_back(float_of((exponent << 23) | (r & 0x7FFFFF)));
    }
  }
  const std::size_t positives = in.size();
  for (std::size_t i = 0; i < positives; ++i) in.push_back(-in[i]);
  return in;
}

// ---- 1. decoding: every code ----

TEST(ConvertDecode, every_code_of_every_format_matches_its_sign_exponent_and_mantissa) {
  for (const Format* f : kDecodeFormats) {
    SCOPED_TRACE(f->name);
    std::uint32_t nans = 0;
    std::uint32_t infs = 0;
    for (std::uint32_t code = 0; code < f->code_count(); ++code) {
      const float got = f->decode(code);
      const Decoded want = oracle_decode(*f, code);
      ASSERT_EQ(std::signbit(got), want.negative) << hex(code);
      switch (want.kind) {
        case Kind::kNan:
          ++nans;
          ASSERT_TRUE(std::isnan(got)) << hex(code) << " -> " << got;
          if (f == &kBF16) {  // a shift: the NaN keeps its bits, signalling or not
            ASSERT_EQ(bits_of(got), code << 16) << hex(code);
          } else {
            ASSERT_NE(bits_of(got) & 0x00400000, 0u) << hex(code) << " decodes to a signalling NaN";
          }
          break;
        case Kind::kInf:
          ++infs;
          ASSERT_TRUE(std::isinf(got)) << hex(code) << " -> " << got;
          break;
        case Kind::kFinite:
          ASSERT_EQ(static_cast<double>(got), want.value) << hex(code);
          break;
      }
    }
    // The classes themselves: IEEE formats have 2 infs and 2 * (2^man - 1) NaNs; e4m3fn 2 NaNs.
    EXPECT_EQ(infs, f->ieee_specials ? 2u : 0u);
    EXPECT_EQ(nans, f->ieee_specials ? 2 * f->man_mask() : 2u);
  }
}

TEST(ConvertDecode, landmark_values_are_the_published_ones) {
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x7F7F), float_of(0x7F7F0000));
  EXPECT_EQ(bf16_to_f32(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x78), 256.0f);  // e4m3fn's top exponent holds numbers
  EXPECT_EQ(f8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(f8e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0xFF)));
  EXPECT_EQ(f8e5m2_to_f32(0x7B), 57344.0f);
  EXPECT_EQ(f8e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(f8e5m2_to_f32(0x7C), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f8e5m2_to_f32(0xFC), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(f8e5m2_to_f32(0x80)));
}

// ---- 2. encoding: against the oracle ----

TEST(ConvertEncode, every_tie_point_value_edge_and_200k_random_floats_round_to_nearest_even) {
  for (const Format* f : kEncodeFormats) {
    SCOPED_TRACE(f->name);
    const EncodeOracle oracle(*f);
    const std::vector<float> inputs = encode_inputs(oracle, 200'000);
    for (const float x : inputs) {
      ASSERT_EQ(f->encode(x), oracle.encode(x)) << "input " << hex(bits_of(x)) << " (" << x << ")";
    }
  }
}

TEST(ConvertEncode, the_oracle_itself_rounds_ties_to_even_and_overflows_as_documented) {
  // Guards the oracle: were it wrong, the test above would bless a wrong encoder.
  const EncodeOracle bf16(kBF16);
  EXPECT_EQ(bf16.encode(float_of(0x3F808000)), 0x3F80u);  // tie, 0x3F80 even: down
  EXPECT_EQ(bf16.encode(float_of(0x3F818000)), 0x3F82u);  // tie, 0x3F81 odd: up
  EXPECT_EQ(bf16.encode(float_of(0x3F808001)), 0x3F81u);
  EXPECT_EQ(bf16.encode(float_of(0x7F7F8000)), 0x7F80u);  // the tie past max overflows
  EXPECT_EQ(bf16.encode(float_of(0x80000001)), 0x8000u);  // tiny negatives keep their sign
  const EncodeOracle e4m3(kE4M3);
  EXPECT_EQ(e4m3.encode(464.0f), 0x7Eu);
  EXPECT_EQ(e4m3.encode(std::nextafter(464.0f, 500.0f)), 0x7Fu);
  EXPECT_EQ(e4m3.encode(-1e6f), 0xFFu);
  const EncodeOracle e4m3_saturating(kE4M3Saturating);
  EXPECT_EQ(e4m3_saturating.encode(-1e6f), 0xFEu);
  const EncodeOracle f16(kF16);
  EXPECT_EQ(f16.encode(std::ldexp(1.0f, -25)), 0x0000u);  // half the smallest subnormal: to 0
  EXPECT_EQ(f16.encode(std::ldexp(3.0f, -25)), 0x0002u);  // 1.5 subnormals: tie to even 2
  EXPECT_EQ(f16.encode(65520.0f), 0x7C00u);
}

TEST(ConvertEncode, e4m3_overflows_to_nan_past_464_as_pytorch_does_and_the_quantiser_saturates) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_f8e4m3(448.0f), 0x7E);
  EXPECT_EQ(f32_to_f8e4m3(464.0f), 0x7E);  // the tie with the missing 480 goes to even 448
  EXPECT_EQ(f32_to_f8e4m3(std::nextafter(464.0f, inf)), 0x7F);
  EXPECT_EQ(f32_to_f8e4m3(480.0f), 0x7F);
  EXPECT_EQ(f32_to_f8e4m3(-1000.0f), 0xFF);
  EXPECT_EQ(f32_to_f8e4m3(inf), 0x7F);
  EXPECT_EQ(f32_to_f8e4m3(-inf), 0xFF);
  EXPECT_EQ(f32_to_f8e4m3_saturating(std::nextafter(448.0f, inf)), 0x7E);
  EXPECT_EQ(f32_to_f8e4m3_saturating(1000.0f), 0x7E);
  EXPECT_EQ(f32_to_f8e4m3_saturating(-inf), 0xFE);
  EXPECT_EQ(f32_to_f8e4m3_saturating(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(f32_to_f8e4m3_saturating(-0.0f), 0x80);
}

TEST(ConvertEncode, nans_stay_quiet_nans_with_their_sign) {
  // A signalling f32 NaN truncated naively would become bf16 inf or f16 inf.
  EXPECT_EQ(f32_to_bf16(float_of(0x7F800001)), 0x7FC0);
  EXPECT_EQ(f32_to_bf16(float_of(0xFFC00000)), 0xFFC0);
  EXPECT_EQ(f32_to_f16(float_of(0x7F800001)), 0x7E00);
  EXPECT_EQ(f32_to_f16(float_of(0xFFC02000)), 0xFE01);
  EXPECT_EQ(f32_to_f8e5m2(float_of(0xFF800001)), 0xFE);
  EXPECT_EQ(f32_to_f8e4m3(float_of(0x7F800001)), 0x7F);
}

// The exhaustive bf16 check costs seconds unoptimised; the Release lanes run it.
TEST(ConvertEncode, bf16_of_every_f32_bit_pattern_keeps_or_bumps_the_top_half_by_the_bottom) {
#ifndef NDEBUG
  GTEST_SKIP() << "exhaustive over 2^32 floats: optimised builds only";
#else
  // A restatement by comparison rather than by carry: bottom half below 0x8000 keeps the top
  // half, above bumps it, at 0x8000 bumps it only when odd; NaN -> sign|0x7FC0.
  const auto want_of = [](std::uint32_t top, std::uint32_t low) -> std::uint32_t {
    const bool nan = (top & 0x7F80) == 0x7F80 && ((top & 0x7F) != 0 || low != 0);
    if (nan) return (top & 0x8000) | 0x7FC0;
    return top + (low > 0x8000 || (low == 0x8000 && (top & 1) != 0) ? 1 : 0);
  };
  // What the bottom half adds to the top half, for an even and an odd top half.
  constexpr std::uint32_t kChunk = 1 << 16;
  std::vector<std::uint16_t> bump_even(kChunk);
  std::vector<std::uint16_t> bump_odd(kChunk);
  for (std::uint32_t low = 0; low < kChunk; ++low) {
    bump_even[low] = low > 0x8000 ? 1 : 0;
    bump_odd[low] = low >= 0x8000 ? 1 : 0;
  }
  std::vector<float> in(kChunk);
  std::vector<std::uint16_t> out(kChunk);
  for (std::uint32_t top = 0; top < 0x10000; ++top) {
    // (On x86-64 a signalling NaN passes through SSE registers unchanged.)
    for (std::uint32_t low = 0; low < kChunk; ++low) in[low] = float_of((top << 16) | low);
    convert_from_f32(in.data(), DType::kBF16, out.data(), kChunk);
    // Count mismatches in a loop the compiler can vectorise (NaN/inf tops take the slow path),
    // then find the first one to report.
    std::uint32_t mismatches = 0;
    if ((top & 0x7F80) != 0x7F80) {
      const std::uint16_t* bump = (top & 1) != 0 ? bump_odd.data() : bump_even.data();
      const auto top16 = static_cast<std::uint16_t>(top);
      for (std::uint32_t low = 0; low < kChunk; ++low) {
        mismatches += static_cast<std::uint16_t>(out[low] - top16) != bump[low] ? 1 : 0;
      }
    } else {
      for (std::uint32_t low = 0; low < kChunk; ++low) {
        mismatches += out[low] != want_of(top, low) ? 1 : 0;
      }
    }
    if (mismatches == 0) continue;
    for (std::uint32_t low = 0; low < kChunk; ++low) {
      if (out[low] != want_of(top, low)) {
        FAIL() << "input " << hex((top << 16) | low) << " -> " << hex(out[low]) << ", want "
               << hex(want_of(top, low)) << " (" << mismatches << " wrong in this block)";
      }
    }
  }
#endif
}

// ---- 3. against ml_dtypes and numpy ----

struct EncodeRecord {
  std::uint32_t f32_bits;
  std::uint32_t bf16, f16, e4m3, e5m2;
};

std::vector<EncodeRecord> read_encode_fixture() {
  std::ifstream in(test::data_path("convert/encode.txt"));
  EXPECT_TRUE(in.good()) << "tests/data/convert/encode.txt is missing";
  std::vector<EncodeRecord> records;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    EncodeRecord r{};
    fields >> std::hex >> r.f32_bits >> r.bf16 >> r.f16 >> r.e4m3 >> r.e5m2;
    EXPECT_FALSE(fields.fail()) << "bad line: " << line;
    records.push_back(r);
  }
  return records;
}

TEST(ConvertReference, every_code_matches_ml_dtypes_and_numpy) {
  const std::vector<EncodeRecord> records = read_encode_fixture();
  ASSERT_GT(records.size(), 5000u);
  std::size_t signalling_nans = 0;
  for (const EncodeRecord& r : records) {
    const float x = float_of(r.f32_bits);
    SCOPED_TRACE("input " + hex(r.f32_bits));
    EXPECT_EQ(f32_to_bf16(x), r.bf16);
    EXPECT_EQ(f32_to_f8e4m3(x), r.e4m3);
    EXPECT_EQ(f32_to_f8e5m2(x), r.e5m2);
    // numpy keeps a signalling NaN signalling in f16 (0x7F800001 -> 0x7C01); Ferry quiets it, as
    // IEEE 754 and F16C hardware do. Everything else must match code for code.
    const bool signalling = std::isnan(x) && (r.f32_bits & 0x00400000) == 0;
    if (signalling) {
      ++signalling_nans;
      EXPECT_EQ(r.f16 & 0xFC00, ((r.f32_bits >> 16) & 0x8000) | 0x7C00u);
      EXPECT_NE(r.f16 & 0x3FF, 0u);
      EXPECT_EQ(f32_to_f16(x), kF16.nan_code(r.f32_bits));
    } else {
      EXPECT_EQ(f32_to_f16(x), r.f16);
    }
    // ml_dtypes has no saturating cast: where its e4m3fn code is a number, ours is the same.
    if ((r.e4m3 & 0x7F) != 0x7F) {
      EXPECT_EQ(f32_to_f8e4m3_saturating(x), r.e4m3);
    }
  }
  EXPECT_GT(signalling_nans, 0u);
}

TEST(ConvertReference, every_f8_code_decodes_as_ml_dtypes_does) {
  std::ifstream in(test::data_path("convert/f8_decode.txt"));
  ASSERT_TRUE(in.good()) << "tests/data/convert/f8_decode.txt is missing";
  std::string line;
  std::uint32_t count = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::uint32_t code = 0, e4m3 = 0, e5m2 = 0;
    fields >> std::hex >> code >> e4m3 >> e5m2;
    ASSERT_FALSE(fields.fail()) << "bad line: " << line;
    ASSERT_EQ(code, count) << "codes out of order";
    ++count;
    for (const auto& [got, want] :
         {std::pair{f8e4m3_to_f32(static_cast<std::uint8_t>(code)), e4m3},
          std::pair{f8e5m2_to_f32(static_cast<std::uint8_t>(code)), e5m2}}) {
      if (std::isnan(float_of(want))) {
        EXPECT_TRUE(std::isnan(got)) << hex(code);
        EXPECT_EQ(std::signbit(got), std::signbit(float_of(want))) << hex(code);
      } else {
        EXPECT_EQ(bits_of(got), want) << hex(code);
      }
    }
  }
  EXPECT_EQ(count, 256u);
}

// ---- 4. bulk conversions ----

const DType kAllDTypes[] = {DType::kF64,    DType::kF32,    DType::kF16, DType::kBF16,
                            DType::kF8E4M3, DType::kF8E5M2, DType::kI64, DType::kI32,
                            DType::kI16,    DType::kI8,     DType::kU8,  DType::kBool};

bool is_integer(DType d) {
  return d == DType::kI64 || d == DType::kI32 || d == DType::kI16 || d == DType::kI8 ||
         d == DType::kU8 || d == DType::kBool;
}

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The scalar value of one element, by the scalar functions and the language's own conversions.
float scalar_to_f32(DType d, const unsigned char* p) {
  switch (d) {
    case DType::kF64:
      return static_cast<float>(load<double>(p));
    case DType::kF32:
      return load<float>(p);
    case DType::kF16:
      return f16_to_f32(load<std::uint16_t>(p));
    case DType::kBF16:
      return bf16_to_f32(load<std::uint16_t>(p));
    case DType::kF8E4M3:
      return f8e4m3_to_f32(*p);
    case DType::kF8E5M2:
      return f8e5m2_to_f32(*p);
    case DType::kI64:
      return static_cast<float>(load<std::int64_t>(p));
    case DType::kI32:
      return static_cast<float>(load<std::int32_t>(p));
    case DType::kI16:
      return static_cast<float>(load<std::int16_t>(p));
    case DType::kI8:
      return static_cast<float>(load<std::int8_t>(p));
    case DType::kU8:
      return static_cast<float>(*p);
    case DType::kBool:
      return *p != 0 ? 1.0f : 0.0f;
    default:  // block types: no element-wise conversion (not in kAllDTypes)
      break;
  }
  return 0;
}

// Random element bytes: every code of the narrow formats; for F64 and F32 a mix of random bit
// patterns and ordinary numbers, so that not every value is huge, tiny or NaN.
std::vector<unsigned char> random_elements(DType d, std::size_t n, std::mt19937& rng) {
  std::vector<unsigned char> bytes(n * dtype_size(d));
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  for (std::size_t i = 0; i < n; i += 2) {
    const double ordinary = (static_cast<double>(rng()) - 2147483648.0) / 1048576.0;
    if (d == DType::kF64) std::memcpy(bytes.data() + 8 * i, &ordinary, 8);
    if (d == DType::kF32) {
      const auto f = static_cast<float>(ordinary);
      std::memcpy(bytes.data() + 4 * i, &f, 4);
    }
  }
  return bytes;
}

constexpr std::uint32_t kSentinel = 0x7FBADBAD;
const std::size_t kLengths[] = {0, 1, 7, 1000};

TEST(ConvertBulk, to_f32_equals_the_scalar_conversions_for_every_dtype_at_any_alignment) {
  std::mt19937 rng(7);
  for (const DType d : kAllDTypes) {
    for (const std::size_t n : kLengths) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " n=" + std::to_string(n));
      const std::vector<unsigned char> elements = random_elements(d, n, rng);
      std::vector<unsigned char> src(elements.size() + 2);  // one byte off any alignment
      if (n != 0) std::memcpy(src.data() + 1, elements.data(), elements.size());
      std::vector<float> dst(n + 2, float_of(kSentinel));  // one float off 16-byte alignment
      convert_to_f32(d, src.data() + 1, dst.data() + 1, n);
      EXPECT_EQ(bits_of(dst.front()), kSentinel);
      EXPECT_EQ(bits_of(dst.back()), kSentinel);
      for (std::size_t i = 0; i < n; ++i) {
        const float want = scalar_to_f32(d, elements.data() + i * dtype_size(d));
        ASSERT_EQ(bits_of(dst[i + 1]), bits_of(want)) << "element " << i;
      }
    }
  }
}

TEST(ConvertBulk, from_f32_equals_the_scalar_conversions_for_every_floating_dtype) {
  std::mt19937 rng(11);
  for (const DType d : kAllDTypes) {
    if (is_integer(d)) continue;
    const std::size_t size = dtype_size(d);
    for (const std::size_t n : kLengths) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " n=" + std::to_string(n));
      std::vector<float> src(n + 1);
      for (std::size_t i = 0; i < n; ++i) {
        src[i + 1] = i % 2 == 0 ? float_of(rng())
                                : (static_cast<float>(rng()) - 2147483648.0f) / 16777216.0f;
      }
      std::vector<unsigned char> dst(n * size + 2, 0xA5);
      convert_from_f32(src.data() + 1, d, dst.data() + 1, n);
      EXPECT_EQ(dst.front(), 0xA5);
      EXPECT_EQ(dst.back(), 0xA5);
      for (std::size_t i = 0; i < n; ++i) {
        const float x = src[i + 1];
        const unsigned char* got = dst.data() + 1 + i * size;
        switch (d) {
          case DType::kF64: {
            const double want = x;
            ASSERT_EQ(std::memcmp(got, &want, 8), 0) << "element " << i;
            break;
          }
          case DType::kF32:
            ASSERT_EQ(load<std::uint32_t>(got), bits_of(x)) << i;
            break;
          case DType::kF16:
            ASSERT_EQ(load<std::uint16_t>(got), f32_to_f16(x)) << i;
            break;
          case DType::kBF16:
            ASSERT_EQ(load<std::uint16_t>(got), f32_to_bf16(x)) << i;
            break;
          case DType::kF8E4M3:
            ASSERT_EQ(*got, f32_to_f8e4m3(x)) << i;
            break;
          case DType::kF8E5M2:
            ASSERT_EQ(*got, f32_to_f8e5m2(x)) << i;
            break;
          default:
            FAIL();
        }
      }
    }
  }
}

TEST(ConvertBulk, integer_targets_are_unsupported_and_integers_convert_by_value) {
  for (const DType d : kAllDTypes) {
    if (!is_integer(d)) continue;
    SCOPED_TRACE(dtype_name(d));
    float x = 1.0f;
    unsigned char out[8] = {};
    EXPECT_EQ(test::error_code_of([&] { convert_from_f32(&x, d, out, 1); }),
              ErrorCode::kUnsupported);
    EXPECT_EQ(test::error_code_of([&] { round_to(d, x); }), ErrorCode::kUnsupported);
  }
  // Rounded once, to nearest even: 2^60 + 2^36 + 1 is above the tie, though through double it
  // would tie and fall to 2^60.
  const std::int64_t i64[] = {0,
                              -1,
                              std::numeric_limits<std::int64_t>::min(),
                              std::numeric_limits<std::int64_t>::max(),
                              1 << 24,
                              (1 << 24) + 1,
                              (1 << 24) + 3,
                              (std::int64_t{1} << 60) + (std::int64_t{1} << 36) + 1};
  float got[8];
  convert_to_f32(DType::kI64, i64, got, 8);
  const float want[] = {0.0f,        -1.0f,       -0x1p63f,    0x1p63f,
                        16777216.0f, 16777216.0f, 16777220.0f, 0x1p60f + 0x1p37f};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], want[i]) << i;
  const unsigned char flags[] = {0, 1, 2, 255};
  float as_float[4];
  convert_to_f32(DType::kBool, flags, as_float, 4);
  EXPECT_EQ(as_float[0], 0.0f);
  EXPECT_EQ(as_float[1], 1.0f);
  EXPECT_EQ(as_float[2], 1.0f);
  EXPECT_EQ(as_float[3], 1.0f);
  const double f64[] = {0.1, 1e300, -1e-300, 1.0 + 0x1p-24};  // 1 + 2^-24 ties to even 1.0
  convert_to_f32(DType::kF64, f64, as_float, 4);
  EXPECT_EQ(as_float[0], 0.1f);
  EXPECT_EQ(as_float[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(bits_of(as_float[2]), 0x80000000u);
  EXPECT_EQ(as_float[3], 1.0f);
}

// ---- 5. round_to: the rounding points of wan.md §1 ----

TEST(ConvertRoundTo, is_the_round_trip_through_each_dtype_and_identity_for_f32_and_f64) {
  std::mt19937 rng(13);
  std::vector<float> inputs = {0.0f,
                               -0.0f,
                               1.0f,
                               464.0f,
                               465.0f,
                               65520.0f,
                               1e-40f,
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               float_of(0x7F800001)};
  for (int i = 0; i < 20'000; ++i) inputs.push_back(float_of(rng()));
  for (const float x : inputs) {
    SCOPED_TRACE("input " + hex(bits_of(x)));
    EXPECT_EQ(bits_of(round_to(DType::kBF16, x)), bits_of(bf16_to_f32(f32_to_bf16(x))));
    EXPECT_EQ(bits_of(round_to(DType::kF16, x)), bits_of(f16_to_f32(f32_to_f16(x))));
    EXPECT_EQ(bits_of(round_to(DType::kF8E4M3, x)), bits_of(f8e4m3_to_f32(f32_to_f8e4m3(x))));
    EXPECT_EQ(bits_of(round_to(DType::kF8E5M2, x)), bits_of(f8e5m2_to_f32(f32_to_f8e5m2(x))));
    EXPECT_EQ(bits_of(round_to(DType::kF32, x)), bits_of(x));
    EXPECT_EQ(bits_of(round_to(DType::kF64, x)), bits_of(x));
  }
  EXPECT_EQ(round_to(DType::kBF16, 1.0f + 0x1p-8f), 1.0f);  // the tie goes to even
  EXPECT_EQ(round_to(DType::kBF16, 1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
}

}  // namespace
}  // namespace ferry
