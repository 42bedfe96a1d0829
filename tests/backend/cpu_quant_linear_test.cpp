// The CPU backend's linear and embedding with block-quantised weights: the dequant-GEMM must give
// exactly the product linear gives for the same weights dequantised to F32 beforehand. The GEMM
// packs the dequantised values where it packs widened f32 ones, with the same blocking, so the
// f32 arithmetic is the same operation for operation: the comparison is bit for bit. Weights are
// random blocks (every code pattern) with finite random half scales, and random bitsandbytes
// codes and states; the dequantiser's own exactness is quant_blocks_test's.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/gemm.h"
#include "core/backend/cpu/quant_blocks.h"
#include "core/error.h"
#include "core/tensor/convert.h"
#include "tests/backend/host_tensor.h"
#include "tests/backend/quant_test_blocks.h"
#include "tests/test_support.h"

namespace ferry::cpu {
namespace {

using test::HostTensor;

// Random blocks whose scales are finite halves of about 0.01.
void fill_random_blocks(const Tensor& w, std::uint32_t seed) {
  std::mt19937 rng(seed);
  auto* bytes = static_cast<std::uint8_t*>(w.data);
  for (std::size_t i = 0; i < w.bytes(); ++i) bytes[i] = static_cast<std::uint8_t>(rng());
  std::normal_distribution<float> scale(0.0f, 0.01f);
  const std::size_t block = dtype_block_bytes(w.dtype);
  for (std::size_t at = 0; at < w.bytes(); at += block) {
    for (int field : test::half_fields(w.dtype)) {
      const std::uint16_t half = f32_to_f16(scale(rng));
      std::memcpy(bytes + at + field, &half, sizeof half);
    }
  }
}

// A bitsandbytes weight's state with random absmax (nested or plain), the NF4 code book.
struct Bnb4Weight {
  HostTensor codes;
  HostTensor absmax;
  HostTensor code;
  HostTensor nested_absmax;
  HostTensor nested_code;
  Bnb4State state;

  Bnb4Weight(std::int64_t n, std::int64_t k, bool nested, std::uint32_t seed)
      : codes(DType::kBnb4, Shape{n, k}),
        absmax(nested ? DType::kU8 : DType::kF32, Shape{n * k / 64}),
        code(DType::kF32, Shape{16},
             {-1.0f, -0.6961928f, -0.52507305f, -0.39491749f, -0.28444138f, -0.18477343f,
              -0.091050036f, 0.0f, 0.079580299f, 0.1609302f, 0.2461123f, 0.33791524f, 0.44070983f,
              0.562617f, 0.72295684f, 1.0f}),
        nested_absmax(DType::kF32, Shape{(n * k / 64 + 255) / 256}),
        nested_code(DType::kF32, Shape{256}) {
    std::mt19937 rng(seed);
    for (std::size_t i = 0; i < codes.t.bytes(); ++i) codes.bytes[i] = std::byte(rng() & 255);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    if (nested) {
      for (std::int64_t i = 0; i < absmax.t.numel(); ++i) absmax.bytes[i] = std::byte(rng() & 255);
      for (std::int64_t i = 0; i < 256; ++i) nested_code.t.as<float>()[i] = unit(rng);
      for (std::int64_t i = 0; i < nested_absmax.t.numel(); ++i) {
        nested_absmax.t.as<float>()[i] = 0.01f * (1.5f + unit(rng));
      }
      state.nested_absmax = nested_absmax.t;
      state.nested_code = nested_code.t;
      state.nested_offset = 0.02f;
    } else {
      for (std::int64_t i = 0; i < absmax.t.numel(); ++i) {
        absmax.t.as<float>()[i] = 0.05f * (1.0f + unit(rng));
      }
    }
    state.absmax = absmax.t;
    state.code = code.t;
    state.blocksize = 64;
  }
};

std::vector<float> dequantized(const Tensor& w, const Bnb4State* bnb4) {
  std::vector<float> out(static_cast<std::size_t>(w.numel()));
  if (w.dtype == DType::kBnb4) {
    dequantize_bnb4(*bnb4, w.as<const std::uint8_t>(), 0, out.data(), w.numel());
  } else {
    dequantize(w.dtype, w.data, out.data(), w.numel());
  }
  return out;
}

struct Case {
  const char* name;
  DType dtype;
  bool nested = false;  // kBnb4 only
};

// gtest names the case by its type in failures and in ctest's list (not by its bytes).
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class CpuQuantLinear : public ::testing::TestWithParam<Case> {};

// Bit-for-bit equality of two runs of the same op.
void expect_same_bits(const HostTensor& got, const HostTensor& want, const std::string& what) {
  ASSERT_EQ(got.t.bytes(), want.t.bytes());
  const std::vector<float> g = got.values();
  const std::vector<float> w = want.values();
  std::size_t differ = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::memcmp(&g[i], &w[i], sizeof(float)) != 0 && differ++ < 5) {
      ADD_FAILURE() << what << " value " << i << ": " << g[i] << " != " << w[i];
    }
  }
  EXPECT_EQ(differ, 0u) << what;
}

TEST_P(CpuQuantLinear, equals_linear_on_the_dequantised_weight_bit_for_bit) {
  const Case& c = GetParam();
  CpuBackend backend;
  const bool legacy = dtype_block_elems(c.dtype) == 32;
  const bool bnb = c.dtype == DType::kBnb4;
  // K = 3 super-blocks; legacy types also 5 blocks of 32 (a K the GEMM's kc does not divide
  // into whole blocks), bitsandbytes 5 blocks of 64.
  std::vector<std::int64_t> depths = {256 * 3};
  if (legacy) depths.push_back(32 * 5);
  if (bnb) depths.push_back(64 * 5);
  const std::int64_t m = 7;   // odd: edge tiles in M
  const std::int64_t n = 37;  // not a multiple of any kernel's nr
  std::uint32_t seed = 1;
  for (std::int64_t k : depths) {
    HostTensor w(c.dtype, Shape{n, k});
    std::unique_ptr<Bnb4Weight> bnb_weight;
    WeightScaling scaling;
    if (bnb) {
      bnb_weight = std::make_unique<Bnb4Weight>(n, k, c.nested, seed++);
      w.t.data = bnb_weight->codes.t.data;
      scaling.bnb4 = &bnb_weight->state;
    } else {
      fill_random_blocks(w.t, seed++);
    }
    const std::vector<float> w_values = dequantized(w.t, scaling.bnb4);
    HostTensor w_f32(DType::kF32, Shape{n, k}, w_values);
    HostTensor bias(DType::kF32, Shape{n}, test::random_values(static_cast<std::size_t>(n), 9));
    for (DType y_dtype : {DType::kF32, DType::kBF16}) {
      for (bool with_bias : {false, true}) {
        for (float scale : {1.0f, 0.75f}) {
          const std::string what = std::string(c.name) + " K=" + std::to_string(k) +
                                   " y=" + std::string(dtype_name(y_dtype)) +
                                   (with_bias ? " bias" : "") + " scale " + std::to_string(scale);
          HostTensor x(y_dtype, Shape{m, k},
                       test::random_values(static_cast<std::size_t>(m * k), 3));
          HostTensor y(y_dtype, Shape{m, n});
          HostTensor y_ref(y_dtype, Shape{m, n});
          scaling.scale = scale;
          backend.linear(x.t, w.t, with_bias ? &bias.t : nullptr, y.t, scaling);
          backend.linear(x.t, w_f32.t, with_bias ? &bias.t : nullptr, y_ref.t, scale);
          expect_same_bits(y, y_ref, what);
          // linear_add (a LoRA's terms) accumulates the same product into what y holds.
          backend.linear_add(x.t, w.t, y.t, scaling);
          backend.linear_add(x.t, w_f32.t, y_ref.t, scale);
          expect_same_bits(y, y_ref, what + " linear_add");
        }
      }
    }
  }
}

// The GEMM entry point on each path this build has, and with a thread pool of its own: the same
// bits as gemm_f32 on the dequantised weight on that path.
TEST_P(CpuQuantLinear, gemm_equals_gemm_f32_on_each_path) {
  const Case& c = GetParam();
  const bool bnb = c.dtype == DType::kBnb4;
  const std::int64_t m = 33;
  const std::int64_t n = 70;
  // Two super-blocks; for the legacy types also 5 blocks of 32, which the own GEMM's kc (80)
  // cuts inside a block: a panel then starts and ends in the middle of one.
  std::vector<std::int64_t> depths = {256 * 2};
  if (dtype_block_elems(c.dtype) == 32) depths.push_back(32 * 5);
  ThreadPool pool(3);
  for (std::int64_t k : depths) {
    HostTensor w(c.dtype, Shape{n, k});
    std::unique_ptr<Bnb4Weight> bnb_weight;
    const Bnb4State* state = nullptr;
    if (bnb) {
      bnb_weight = std::make_unique<Bnb4Weight>(n, k, c.nested, 11);
      w.t.data = bnb_weight->codes.t.data;
      state = &bnb_weight->state;
    } else {
      fill_random_blocks(w.t, 11);
    }
    const std::vector<float> w_values = dequantized(w.t, state);
    const std::vector<float> a = test::random_values(static_cast<std::size_t>(m * k), 5);
    for (GemmPath path : {GemmPath::kOwn, GemmPath::kOpenBlas}) {
      if (!gemm_path_available(path)) continue;
      std::vector<float> got(static_cast<std::size_t>(m * n), 1.0f);
      std::vector<float> want(static_cast<std::size_t>(m * n), 1.0f);
      const auto mm = static_cast<std::size_t>(m);
      const auto nn = static_cast<std::size_t>(n);
      const auto kk = static_cast<std::size_t>(k);
      gemm_quant_weights(mm, nn, kk, 0.5f, a.data(), kk, c.dtype, w.t.data, state, 0.25f,
                         got.data(), nn, pool, path);
      gemm_f32(mm, nn, kk, 0.5f, a.data(), kk, w_values.data(), kk, true, 0.25f, want.data(), nn,
               pool, path);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
          << c.name << " K=" << k << (path == GemmPath::kOwn ? " own GEMM" : " OpenBLAS");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryBlockType, CpuQuantLinear,
                         ::testing::Values(Case{"Q8_0", DType::kQ8_0}, Case{"Q4_0", DType::kQ4_0},
                                           Case{"Q4_1", DType::kQ4_1}, Case{"Q5_0", DType::kQ5_0},
                                           Case{"Q5_1", DType::kQ5_1}, Case{"Q2_K", DType::kQ2_K},
                                           Case{"Q3_K", DType::kQ3_K}, Case{"Q4_K", DType::kQ4_K},
                                           Case{"Q5_K", DType::kQ5_K}, Case{"Q6_K", DType::kQ6_K},
                                           Case{"NF4_nested", DType::kBnb4, true},
                                           Case{"NF4_plain", DType::kBnb4, false}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(CpuQuantLinearErrors, refuses_partial_blocks_and_a_missing_state) {
  std::vector<float> a(64 * 2, 1.0f);
  std::vector<std::uint8_t> b(1024, 0);
  std::vector<float> c(4);
  // K = 96 is not whole 256-value blocks of Q4_K.
  EXPECT_EQ(test::error_code_of([&] {
              gemm_quant_weights(1, 1, 96, 1.0f, a.data(), 96, DType::kQ4_K, b.data(), nullptr,
                                 0.0f, c.data(), 1);
            }),
            ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] {
              gemm_quant_weights(1, 1, 64, 1.0f, a.data(), 64, DType::kBnb4, b.data(), nullptr,
                                 0.0f, c.data(), 1);
            }),
            ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] {
              gemm_quant_weights(1, 1, 64, 1.0f, a.data(), 64, DType::kBF16, b.data(), nullptr,
                                 0.0f, c.data(), 1);
            }),
            ErrorCode::kBadArgument);
  // linear with a bitsandbytes weight and no state.
  CpuBackend backend;
  HostTensor x(DType::kF32, Shape{1, 64});
  HostTensor w(DType::kBnb4, Shape{2, 64});
  HostTensor y(DType::kF32, Shape{1, 2});
  EXPECT_EQ(test::error_code_of([&] { backend.linear(x.t, w.t, nullptr, y.t, 1.0f); }),
            ErrorCode::kInternal);
}

// embedding over a quantised table (umT5 GGUF's token_embd): each row dequantised alone.
TEST(CpuQuantEmbedding, gathers_dequantised_rows) {
  CpuBackend backend;
  for (DType dtype : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    const std::int64_t rows = 11;
    const std::int64_t dim = 512;
    HostTensor table(dtype, Shape{rows, dim});
    fill_random_blocks(table.t, 21);
    const std::vector<float> values = dequantized(table.t, nullptr);
    HostTensor ids(DType::kI32, Shape{5});
    const std::int32_t picks[5] = {10, 0, 3, 3, 7};
    std::memcpy(ids.t.data, picks, sizeof picks);
    for (DType y_dtype : {DType::kF32, DType::kBF16}) {
      HostTensor y(y_dtype, Shape{5, dim});
      backend.embedding(table.t, ids.t, y.t);
      const std::vector<float> got = y.values();
      for (std::int64_t i = 0; i < 5; ++i) {
        for (std::int64_t j = 0; j < dim; ++j) {
          const float want =
              round_to(y_dtype, values[static_cast<std::size_t>(picks[i] * dim + j)]);
          const float g = got[static_cast<std::size_t>(i * dim + j)];
          ASSERT_EQ(std::memcmp(&g, &want, sizeof g), 0)
              << dtype_name(dtype) << " id " << picks[i] << " value " << j;
        }
      }
    }
  }
  HostTensor table(DType::kBnb4, Shape{4, 64});
  HostTensor ids(DType::kI32, Shape{1});
  HostTensor y(DType::kF32, Shape{1, 64});
  EXPECT_EQ(test::error_code_of([&] { backend.embedding(table.t, ids.t, y.t); }),
            ErrorCode::kInternal);
}

}  // namespace
}  // namespace ferry::cpu
