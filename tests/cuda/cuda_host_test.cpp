// The CUDA backend's host-side pieces, checked without a GPU: the element codecs the kernels use
// (cuda/float_codec.h, compiled here for the host) against core/tensor/convert.h bit for bit, the
// T5 bucket function against wan.md §A.2 and the CPU backend, and the GEMM chunk plans.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/backend/backend.h"
#include "core/tensor/convert.h"
#include "cuda/float_codec.h"
#include "cuda/gemm_plan.h"

namespace ferry::cuda {
namespace {

std::uint32_t bits(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

float from_bits(std::uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

TEST(FloatCodec, decoders_match_convert_h_for_every_code) {
  for (std::uint32_t c = 0; c < 0x10000; ++c) {
    const auto code = static_cast<std::uint16_t>(c);
    ASSERT_EQ(bits(codec::decode_bf16(code)), bits(bf16_to_f32(code))) << std::hex << c;
    ASSERT_EQ(bits(codec::decode_f16(code)), bits(f16_to_f32(code))) << std::hex << c;
  }
  for (std::uint32_t c = 0; c < 0x100; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    ASSERT_EQ(bits(codec::decode_e4m3(code)), bits(f8e4m3_to_f32(code))) << std::hex << c;
    ASSERT_EQ(bits(codec::decode_e5m2(code)), bits(f8e5m2_to_f32(code))) << std::hex << c;
  }
}

void expect_encoders_agree(std::uint32_t b) {
  const float v = from_bits(b);
  ASSERT_EQ(codec::encode_bf16(v), f32_to_bf16(v)) << std::hex << b;
  ASSERT_EQ(codec::encode_f16(v), f32_to_f16(v)) << std::hex << b;
  ASSERT_EQ(codec::encode_e4m3(v), f32_to_f8e4m3(v)) << std::hex << b;
  ASSERT_EQ(codec::encode_e5m2(v), f32_to_f8e5m2(v)) << std::hex << b;
}

TEST(FloatCodec, encoders_match_convert_h_at_every_rounding_boundary_and_at_random) {
  // Every sign/exponent/top-mantissa pattern with low halves on and around the ties of each
  // format (bf16 drops 16 bits, f16 13, e5m2 21, e4m3 20: ties at 0x8000, 0x1000 and above).
  const std::uint32_t lows[] = {0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000,
                                0x3000, 0x7FFF, 0x8000, 0x8001, 0x9000, 0xC000, 0xFFFF};
  for (std::uint32_t high = 0; high < 0x10000; ++high) {
    for (const std::uint32_t low : lows) {
      expect_encoders_agree(high << 16 | low);
      if (HasFatalFailure()) return;
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 2'000'000; ++i) {
    expect_encoders_agree(static_cast<std::uint32_t>(rng()));
    if (HasFatalFailure()) return;
  }
}

TEST(T5Bucket, matches_the_wan_reference_table_and_the_cpu_backend) {
  const float log16 = static_cast<float>(std::log(16.0));
  auto expected_magnitude = [](std::int64_t a) {
    if (a < 8) return static_cast<int>(a);
    if (a <= 11) return 8;
    if (a <= 15) return 9;
    if (a <= 22) return 10;
    if (a <= 31) return 11;
    if (a <= 45) return 12;
    if (a <= 63) return 13;
    if (a <= 90) return 14;
    return 15;
  };
  for (std::int64_t r = -2000; r <= 2000; ++r) {
    const std::int64_t a = r < 0 ? -r : r;
    const int want = (r > 0 ? 16 : 0) + expected_magnitude(a);
    ASSERT_EQ(codec::t5_bucket(r, log16), want) << r;
    ASSERT_EQ(codec::t5_bucket(r, log16), t5_relative_bucket(r)) << r;
  }
}

TEST(GemmPlan, chunks_fit_the_workspace_and_cover_everything) {
  const std::size_t budgets[] = {1 << 12, 256 << 10, 64 << 20};
  const std::int64_t sizes[][3] = {
      {1, 1, 1}, {27280, 5120, 13824}, {300, 96, 70}, {7, 14336, 5120}, {6240, 27648, 1024}};
  for (const std::size_t budget : budgets) {
    for (const auto& s : sizes) {
      for (int mask = 0; mask < 8; ++mask) {
        GemmStaging need;
        need.total_rows = s[0];
        need.total_panel = s[2];
        need.a_row_bytes = (mask & 1) ? static_cast<std::size_t>(s[1]) * 2 : 0;
        need.w_row_bytes = (mask & 2) ? static_cast<std::size_t>(s[1]) * 2 : 0;
        need.staging = (mask & 4) != 0;
        const auto plan = plan_gemm_chunks(need, budget);
        const std::size_t one = gemm_footprint(need, GemmChunks{1, 1});
        if (!plan) {
          EXPECT_GT(one, budget) << "a plan exists: one row and one panel fit";
          continue;
        }
        EXPECT_GE(plan->rows, 1);
        EXPECT_LE(plan->rows, s[0]);
        EXPECT_GE(plan->panel, 1);
        EXPECT_LE(plan->panel, s[2]);
        EXPECT_LE(gemm_footprint(need, *plan), budget);
        if (mask == 0) {  // nothing staged: one block
          EXPECT_EQ(plan->rows, s[0]);
          EXPECT_EQ(plan->panel, s[2]);
        }
      }
    }
  }
}

TEST(GemmPlan, a_dit_ffn_product_keeps_large_blocks_in_64_mib) {
  // TI2V-5B FFN up-projection with f32 x rounded to bf16 and an fp8 weight dequantised.
  GemmStaging need;
  need.total_rows = 27280;
  need.total_panel = 14336;
  need.a_row_bytes = 3072 * 2;
  need.w_row_bytes = 3072 * 2;
  const auto plan = plan_gemm_chunks(need, std::size_t{64} << 20);
  ASSERT_TRUE(plan.has_value());
  EXPECT_GE(plan->rows, 4096);
  EXPECT_GE(plan->panel, 4096);
}

}  // namespace
}  // namespace ferry::cuda
