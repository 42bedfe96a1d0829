// The CUDA backend's host-side pieces, checked without a GPU: the element codecs the kernels use
// (cuda/float_codec.h, compiled here for the host) against core/tensor/convert.h bit for bit, the
// T5 bucket function against wan.md §A.2 and the CPU backend, the GEMM chunk plans, linear's
// staging plan and the cuBLASLt plan cache.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/backend/backend.h"
#include "core/models/wan/dit_layout.h"
#include "core/tensor/convert.h"
#include "cuda/float_codec.h"
#include "cuda/gemm_cache.h"
#include "cuda/gemm_plan.h"
#include "cuda/linear_plan.h"

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

// ---- linear's staging plan (cuda/linear_plan.h) ----

// Weight elements linear converts into the workspace over one product, in the plan's order: a
// panel is converted when the loop reaches a panel other than the one the workspace holds.
std::int64_t weight_elements_converted(const LinearPlan& p, std::int64_t m, std::int64_t k,
                                       std::int64_t n) {
  std::int64_t held = -1, converted = 0;
  for_each_linear_block(p, m, n,
                        [&](std::int64_t, std::int64_t, std::int64_t n0, std::int64_t panel) {
                          if (p.convert_w && held != n0) {
                            converted += panel * k;
                            held = n0;
                          }
                        });
  return converted;
}

TEST(LinearPlan, an_fp8_ffn_layer_at_720p_dequantises_its_weights_once) {
  // 27,280 tokens, 3072 -> 14,336, bf16 x and y, fp8 weights, an f32 bias (staged in f32):
  // row blocks of 1,536 and panels of 5,461 in the default 64 MiB workspace.
  const std::int64_t m = 27280, k = 3072, n = 14336;
  const DType bias = DType::kF32;
  const DType t = linear_gemm_type(DType::kBF16, DType::kF8E4M3, DType::kBF16);
  ASSERT_EQ(t, DType::kBF16);
  const auto p = plan_linear(m, k, n, DType::kBF16, DType::kF8E4M3, &bias, DType::kBF16, t,
                             std::size_t{64} << 20);
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->convert_w);
  EXPECT_FALSE(p->convert_x);
  EXPECT_TRUE(p->staging);
  EXPECT_LT(p->chunks.rows, m);  // several row blocks: the case that converted per row block
  EXPECT_EQ(weight_elements_converted(*p, m, k, n), n * k);
}

TEST(LinearPlan, converts_x_once_per_row_block_when_only_x_needs_converting) {
  // f32 x into bf16 y with bf16 weights: x rounded to bf16 block by block, w read in place.
  const std::int64_t m = 27280, k = 3072, n = 3072;
  const DType bias = DType::kBF16;
  const auto p = plan_linear(m, k, n, DType::kF32, DType::kBF16, &bias, DType::kBF16, DType::kBF16,
                             std::size_t{64} << 20);
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->convert_x);
  EXPECT_FALSE(p->convert_w);
  EXPECT_FALSE(p->panels_outer);
  std::int64_t held = -1, x_converted = 0;
  for_each_linear_block(*p, m, n,
                        [&](std::int64_t r0, std::int64_t rows, std::int64_t, std::int64_t) {
                          if (held != r0) x_converted += rows * k;
                          held = r0;
                        });
  EXPECT_EQ(x_converted, m * k);
}

// ---- the cuBLASLt plan cache (cuda/gemm_cache.h) ----

TEST(GemmPlanCache, makes_one_plan_per_key_and_tells_alignment_and_beta_apart) {
  GemmPlanCache<int> cache;
  int made = 0;
  const auto make = [&](const GemmPlanKey&) { return ++made; };
  GemmPlanKey key;
  key.m = 3072;
  key.n = 1536;
  key.k = 3072;
  key.lda = key.ldb = key.ldd = 3072;
  key.align_a = key.align_b = key.align_d = 256;
  EXPECT_EQ(cache.get(key, make), 1);
  EXPECT_EQ(cache.get(key, make), 1);
  GemmPlanKey other = key;
  other.align_d = 2;
  EXPECT_EQ(cache.get(other, make), 2);
  other = key;
  other.adds_d = true;
  EXPECT_EQ(cache.get(other, make), 3);
  other = key;
  other.ldd = 1536;
  EXPECT_EQ(cache.get(other, make), 4);
  EXPECT_EQ(cache.get(key, make), 1);
  EXPECT_EQ(made, 4);
  EXPECT_EQ(alignment_of(reinterpret_cast<const void*>(std::uintptr_t{0x1000})), 256u);
  EXPECT_EQ(alignment_of(reinterpret_cast<const void*>(std::uintptr_t{0x1006})), 2u);
}

// One denoising step of Wan 2.2 TI2V-5B at 1280x704x121 (27,280 tokens; the CFG pair as two
// streams; 30 blocks), as CudaBackend::linear issues its GEMMs: each linear of WanDit's forward
// (core/models/wan/dit.cpp, with its activation dtypes and bf16 weights and biases) planned by
// plan_linear, block by block, into GemmPlanKeys (operand addresses: every tensor 256-aligned, as
// the arena and the weight slots place them, plus the block's offset). Counted: the GEMM calls,
// each of which used to make a heuristic query and 5-6 descriptors, and the plans the cache
// makes (one heuristic query each, two when a 16-bit D finds nothing under the reduction mask).
TEST(GemmPlanCache, one_dit_step_at_720p_makes_a_plan_per_distinct_product) {
  const auto& c = models::wan::kTI2V_5B;
  const std::int64_t tokens = models::wan::dit_tokens(c, 1280, 704, 121);
  ASSERT_EQ(tokens, 27280);
  const auto d = static_cast<std::int64_t>(c.dim), f = static_cast<std::int64_t>(c.ffn_dim);
  const std::int64_t text = models::wan::kDitTextLen, values = 2, streams = 2;
  struct Linear {
    std::int64_t m, k, n;
    DType x, y;
  };
  std::vector<Linear> step;
  const auto add = [&](std::int64_t times, Linear l) {
    for (std::int64_t i = 0; i < times; ++i) step.push_back(l);
  };
  const DType f32 = DType::kF32, bf16 = DType::kBF16;
  add(1, {tokens, static_cast<std::int64_t>(c.in_dim) * 4, d, f32, bf16});  // patch embedding
  add(1, {values, static_cast<std::int64_t>(c.freq_dim), d, f32, f32});     // time
  add(1, {values, d, d, f32, f32});
  add(1, {values, d, 6 * d, f32, f32});
  add(streams, {text, static_cast<std::int64_t>(c.text_dim), d, bf16, bf16});  // text
  add(streams, {text, d, d, bf16, bf16});
  for (std::uint64_t block = 0; block < c.layers; ++block) {
    add(3 * streams, {tokens, d, d, f32, bf16});  // self q, k, v
    add(streams, {tokens, d, d, bf16, bf16});     // self o
    add(streams, {tokens, d, d, f32, bf16});      // cross q
    add(2 * streams, {text, d, d, bf16, bf16});   // cross k, v
    add(streams, {tokens, d, d, bf16, bf16});     // cross o
    add(streams, {tokens, d, f, f32, bf16});      // FFN up
    add(streams, {tokens, f, d, bf16, bf16});     // FFN down
  }
  add(streams, {tokens, d, static_cast<std::int64_t>(c.out_dim) * 4, f32, f32});  // head

  const DType bias = bf16, w = bf16;
  const auto at = [](std::int64_t offset) {
    return reinterpret_cast<const void*>(std::uintptr_t{1} << 32 |
                                         static_cast<std::uintptr_t>(offset));
  };
  GemmPlanCache<int> cache;
  std::int64_t calls = 0, plans = 0;
  for (int s = 0; s < 2; ++s) {  // two steps: the second must make no plan
    const std::int64_t plans_before = plans;
    for (const Linear& l : step) {
      const DType t = linear_gemm_type(l.x, w, l.y);
      const auto p = plan_linear(l.m, l.k, l.n, l.x, w, &bias, l.y, t, std::size_t{64} << 20);
      ASSERT_TRUE(p.has_value());
      const int gemm_type = t == f32 ? 0 : 14;  // CUDA_R_32F, CUDA_R_16BF
      for_each_linear_block(
          *p, l.m, l.n,
          [&](std::int64_t r0, std::int64_t rows, std::int64_t n0, std::int64_t panel) {
            GemmPlanKey key;
            key.m = panel;
            key.n = rows;
            key.k = l.k;
            key.lda = key.ldb = l.k;
            key.a_type = key.b_type = gemm_type;
            key.trans_a = true;
            key.align_a = alignment_of(p->convert_w ? at(0) : at(n0 * l.k * 2));
            key.align_b = alignment_of(
                p->convert_x ? at(0) : at(r0 * l.k * static_cast<std::int64_t>(dtype_size(l.x))));
            if (p->staging) {
              key.ldd = panel;
              key.align_d = 256;
            } else {
              key.ldd = l.n;
              key.d_type = l.y == f32 ? 0 : 14;
              key.adds_d = true;
              key.align_d =
                  alignment_of(at((r0 * l.n + n0) * static_cast<std::int64_t>(dtype_size(l.y))));
            }
            ++calls;
            cache.get(key, [&](const GemmPlanKey&) { return static_cast<int>(++plans); });
          });
    }
    if (s == 1) {
      EXPECT_EQ(plans, plans_before) << "the second step made plans";
    }
  }
  const std::int64_t calls_per_step = calls / 2;
  std::printf(
      "one TI2V-5B step at 1280x704x121: %lld linear calls, %lld GEMM calls (each a heuristic "
      "query and 5-6 descriptors before the cache); %lld plans with the cache in the first "
      "step, 0 in the next\n",
      static_cast<long long>(step.size()), static_cast<long long>(calls_per_step),
      static_cast<long long>(plans));
  EXPECT_EQ(static_cast<std::size_t>(plans), cache.size());
  EXPECT_LT(plans * 20, calls_per_step);
}

}  // namespace
}  // namespace ferry::cuda
