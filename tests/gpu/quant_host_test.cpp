// The CUDA dequantisers' arithmetic, run on the host: cuda/quant_decode.cuh is the very code the
// kernels run (there with explicitly rounded f32 operations), so checking it bit for bit against
// the CPU's dequantisers (core/backend/cpu/quant_blocks.h, the oracle) on every machine that
// builds the CUDA backend catches a wrong bit position, association or sign before any GPU runs
// it. tests/gpu/quant_parity_test.cpp checks the kernels themselves on a GPU.
//
// Also here: the floor under that test's linear bounds (quant_linear_reference.h), measured on the
// CPU. The same products summed in another order (f64, rounded once) stay inside the bound
// against the CPU's linear, and the bf16-rounded weights' result inside the rounding bound
// against the exact weights', with the ratios printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/quant_blocks.h"
#include "core/tensor/quant.h"
#include "cuda/quant_decode.cuh"
#include "tests/gpu/quant_linear_reference.h"
#include "tests/backend/quant_test_blocks.h"

namespace ferry {
namespace {

// A value with all its digits and its bits: "-0.00275993184 (0xbb34e000)".
std::string bits_text(float v) {
  char text[48];
  std::snprintf(text, sizeof text, "%.9g (0x%08x)", static_cast<double>(v),
                static_cast<unsigned>(std::bit_cast<std::uint32_t>(v)));
  return text;
}

// The first value whose bits differ (with both values), or "" when all are equal.
std::string first_difference(const std::vector<float>& want, const std::vector<float>& got) {
  std::int64_t differing = 0;
  std::string first;
  for (std::size_t j = 0; j < want.size(); ++j) {
    if (std::bit_cast<std::uint32_t>(want[j]) == std::bit_cast<std::uint32_t>(got[j])) continue;
    if (differing++ == 0) {
      first = "value " + std::to_string(j) + ": cpu " + bits_text(want[j]) + ", cuda decoder " +
              bits_text(got[j]);
    }
  }
  return differing == 0 ? "" : std::to_string(differing) + " values differ, first " + first;
}

// The decoders' block sizes are core/tensor/dtype.h's (a mismatch would misread every block
// after the first).
template <DType T>
void expect_block_geometry() {
  EXPECT_EQ(cuda::quant::Block<T>::kElems, dtype_block_elems(T)) << dtype_name(T);
  EXPECT_EQ(static_cast<std::size_t>(cuda::quant::Block<T>::kBytes), dtype_block_bytes(T))
      << dtype_name(T);
}

TEST(CudaQuantDecode, block_sizes_are_the_dtype_tables) {
  expect_block_geometry<DType::kQ4_0>();
  expect_block_geometry<DType::kQ4_1>();
  expect_block_geometry<DType::kQ5_0>();
  expect_block_geometry<DType::kQ5_1>();
  expect_block_geometry<DType::kQ8_0>();
  expect_block_geometry<DType::kQ2_K>();
  expect_block_geometry<DType::kQ3_K>();
  expect_block_geometry<DType::kQ4_K>();
  expect_block_geometry<DType::kQ5_K>();
  expect_block_geometry<DType::kQ6_K>();
}

TEST(CudaQuantDecode, ggml_values_are_bit_exact_with_the_cpu_dequantiser_for_every_block_type) {
  std::uint32_t seed = 1;
  for (const DType t : test::kBlockTypes) {
    std::vector<std::uint8_t> bytes = test::random_blocks(t, 1024, seed++);
    const std::vector<std::uint8_t> edges = test::edge_blocks(t, seed++);
    bytes.insert(bytes.end(), edges.begin(), edges.end());
    const auto blocks = static_cast<std::int64_t>(bytes.size() / dtype_block_bytes(t));
    const std::int64_t count = blocks * dtype_block_elems(t);
    std::vector<float> want(static_cast<std::size_t>(count));
    cpu::dequantize(t, bytes.data(), want.data(), count);
    cuda::QuantWeight w;
    w.dtype = t;
    w.data = bytes.data();
    std::vector<float> got(want.size());
    for (std::int64_t j = 0; j < count; ++j)
      got[static_cast<std::size_t>(j)] = cuda::quant::value_at(w, j);
    EXPECT_EQ(first_difference(want, got), "") << dtype_name(t) << ", " << blocks << " blocks";
  }
}

TEST(CudaQuantDecode, bitsandbytes_values_are_bit_exact_with_the_cpu_dequantiser) {
  std::uint32_t seed = 100;
  for (const bool nested : {false, true}) {
    for (const bool nf4 : {true, false}) {
      // 1101 blocks of 64, the last one partial: 5 nested blocks, the last one partial too.
      const test::Bnb4Host h = test::random_bnb4(64 * 1100 + 37, nested, nf4, seed++);
      Bnb4State state;
      state.blocksize = h.blocksize;
      state.nested_blocksize = h.nested_blocksize;
      state.code = test::host_tensor(DType::kF32, {16}, h.code.data());
      if (nested) {
        state.absmax = test::host_tensor(DType::kU8, {h.blocks()}, h.absmax_u8.data());
        state.nested_absmax =
            test::host_tensor(DType::kF32, {static_cast<std::int64_t>(h.nested_absmax.size())},
                              h.nested_absmax.data());
        state.nested_code = test::host_tensor(DType::kF32, {256}, h.nested_code.data());
        state.nested_offset = h.nested_offset;
      } else {
        state.absmax = test::host_tensor(DType::kF32, {h.blocks()}, h.absmax_f32.data());
      }
      std::vector<float> want(static_cast<std::size_t>(h.count));
      cpu::dequantize_bnb4(state, h.codes.data(), 0, want.data(), h.count);

      cuda::QuantWeight w;
      w.dtype = DType::kBnb4;
      w.data = h.codes.data();
      w.absmax = nested ? static_cast<const void*>(h.absmax_u8.data()) : h.absmax_f32.data();
      w.nested = nested;
      w.code = h.code.data();
      w.nested_absmax = h.nested_absmax.data();
      w.nested_code = h.nested_code.data();
      w.nested_offset = h.nested_offset;
      w.blocksize = h.blocksize;
      w.nested_blocksize = h.nested_blocksize;
      std::vector<float> got(want.size());
      for (std::int64_t j = 0; j < h.count; ++j)
        got[static_cast<std::size_t>(j)] = cuda::quant::value_at(w, j);
      EXPECT_EQ(first_difference(want, got), "")
          << (nested ? "nested" : "plain") << (nf4 ? " NF4" : " FP4");
    }
  }
}

// The same products as the GEMM sees them (x rounded to y's dtype, w bf16-rounded or exact),
// summed in f64 and rounded once to f32, the bias added in f32, rounded to y: a summation order
// other than the CPU's, the difference cuBLASLt's order makes.
std::vector<float> other_order(const test::LinearReference& r, const test::LinearCase& c,
                               std::int64_t m, std::int64_t k, std::int64_t n,
                               const std::vector<std::uint8_t>& b_bytes) {
  const std::vector<float> bias = test::as_f32(c.b, b_bytes.data(), n);
  std::vector<float> y(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (std::int64_t l = 0; l < k; ++l) {
        sum += static_cast<double>(r.x_gemm[static_cast<std::size_t>(i * k + l)]) *
               static_cast<double>(r.w_gemm[static_cast<std::size_t>(j * k + l)]);
      }
      float v = static_cast<float>(sum);
      if (c.bias) v += bias[static_cast<std::size_t>(j)];
      y[static_cast<std::size_t>(i * n + j)] = round_to(c.y, v);
    }
  }
  return y;
}

TEST(QuantLinearBounds, another_summation_order_on_the_cpu_stays_inside_the_gpu_tests_bounds) {
  cpu::CpuBackend cpu;
  std::uint32_t seed = 7000;
  double worst_same = 0, worst_exact = 0;
  for (const DType t : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    const std::int64_t k = dtype_block_elems(t) == 256 ? 768 : 160;
    for (const auto& [m, n] : {std::pair<std::int64_t, std::int64_t>{37, 129}, {300, 70}}) {
      const std::vector<std::uint8_t> blocks =
          test::random_blocks(t, n * k / dtype_block_elems(t), seed++, /*moderate=*/true);
      std::vector<float> w_exact(static_cast<std::size_t>(n * k));
      cpu::dequantize(t, blocks.data(), w_exact.data(), n * k);
      for (const test::LinearCase& c : test::kLinearCases) {
        const std::vector<std::uint8_t> x_bytes = test::random_values(c.x, m * k, seed++);
        const std::vector<std::uint8_t> b_bytes = test::random_values(c.b, n, seed++);
        const test::LinearReference r =
            test::linear_reference(cpu, c, m, k, n, x_bytes, b_bytes,
                                   test::host_tensor(t, {n, k}, blocks.data()), {}, w_exact);
        const std::vector<float> got = other_order(r, c, m, k, n, b_bytes);
        const std::string what = std::string(dtype_name(t)) + " x " + std::string(dtype_name(c.x)) +
                                 " -> " + std::string(dtype_name(c.y)) + " " + std::to_string(m) +
                                 "x" + std::to_string(k) + "x" + std::to_string(n);
        std::string where;
        const double same = test::normalised_error(r.want, got, &where);
        EXPECT_LE(same, r.threshold) << what << " at " << where;
        worst_same = std::max(worst_same, same / r.threshold);
        if (!r.bf16_gemm) continue;
        const double exact = test::normalised_error(r.want_exact, got, &where);
        EXPECT_LE(exact, r.threshold + r.rounding_bound)
            << what << " vs the exact weights at " << where;
        worst_exact = std::max(worst_exact, exact / (r.threshold + r.rounding_bound));
      }
    }
  }
  std::printf(
      "another summation order: at most %.3f of the same-weights bound, %.3f of the "
      "exact-weights bound\n",
      worst_same, worst_exact);
}

}  // namespace
}  // namespace ferry
