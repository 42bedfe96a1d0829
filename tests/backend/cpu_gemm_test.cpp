// The CPU GEMM on every path (OpenBLAS where the build has it, the own GEMM with each
// micro-kernel this CPU can run) against a float64 reference on random inputs.
//
// Error bound, per output: |c - ref| <= 4 (K + 4) 2^-24 (|alpha| sum_k |a_ik b_kj| + |beta c_ij|).
// An f32 dot product of K terms, summed in any order (blocked, with or without FMA), is within
// gamma_K = K u / (1 - K u), u = 2^-24, of the exact value relative to sum |a b| (Higham, Accuracy
// and Stability of Numerical Algorithms, 3.1). Scaling by alpha, adding beta c, and adding the
// stored partial result once per K panel add two roundings per panel and one more at the end, so
// the error stays below (K + 2 ceil(K / 256) + 4) u: the factor 4 covers that with room for
// OpenBLAS's own blocking, and the bound is still tight enough that dropping one product term
// (about sum / K) exceeds it for every K tested here. Reference inputs are the f32 values the
// GEMM sees (bf16 and f16 weights decoded exactly by the test's own decoder).
//
// Every buffer has padding that must be neither read nor written: rows of A and B end in NaN
// (reading them poisons the result), C's row padding and the guards around C hold a sentinel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/backend/cpu/gemm.h"
#include "core/backend/cpu/gemm_kernels.h"
#include "core/backend/cpu/thread_pool.h"
#include "core/error.h"
#include "core/tensor/convert.h"
#include "tests/test_support.h"

namespace ferry::cpu {
namespace {

using gemm_detail::BFormat;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = -12345.5f;
constexpr std::size_t kGuard = 16;

// The test's own decoders, independent of core/tensor/convert.
double decode_bf16(std::uint16_t bits) {
  const std::uint32_t wide = std::uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

double decode_f16(std::uint16_t bits) {
  const double sign = (bits & 0x8000) != 0 ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);  // subnormal (or zero)
  return sign * std::ldexp(1024 + mantissa, exponent - 25);    // finite values only here
}

struct Shape {
  std::size_t m, n, k;
};

struct Scalars {
  float alpha, beta;
};

// One GEMM's inputs with padded rows, and the float64 reference of its result.
struct Problem {
  Shape shape;
  Scalars scalars;
  BFormat format = BFormat::kF32;
  bool b_transposed = true;
  std::size_t lda = 0, ldb = 0, ldc = 0;
  std::vector<float> a;
  std::vector<float> b_f32;
  std::vector<std::uint16_t> b_16;
  std::vector<float> c0;      // kGuard + m * ldc + kGuard
  std::vector<double> b_ref;  // op(B) [K,N] as the GEMM sees it, exactly

  const void* b() const {
    return format == BFormat::kF32 ? static_cast<const void*>(b_f32.data()) : b_16.data();
  }
  double b_value(std::size_t p, std::size_t j) const { return b_ref[p * shape.n + j]; }
};

Problem make_problem(Shape shape, Scalars scalars, BFormat format, bool b_transposed,
                     std::size_t pad, bool nan_in_c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Problem p;
  p.shape = shape;
  p.scalars = scalars;
  p.format = format;
  p.b_transposed = b_transposed;
  const auto [m, n, k] = shape;
  p.lda = k + pad;
  const std::size_t b_rows = b_transposed ? n : k;
  const std::size_t b_row = b_transposed ? k : n;
  p.ldb = b_row + pad;
  p.ldc = n + pad;

  p.a.assign(m * p.lda, kNaN);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t q = 0; q < k; ++q) p.a[i * p.lda + q] = uniform(rng);
  }
  if (format == BFormat::kF32) {
    p.b_f32.assign(b_rows * p.ldb, kNaN);
    for (std::size_t r = 0; r < b_rows; ++r) {
      for (std::size_t q = 0; q < b_row; ++q) p.b_f32[r * p.ldb + q] = uniform(rng);
    }
  } else {
    // Padding: a NaN bit pattern in either format.
    p.b_16.assign(b_rows * p.ldb, 0x7fff);
    std::uniform_int_distribution<int> pick(0, 3);
    std::uniform_int_distribution<int> low_bits(0, 0x3ff);
    for (std::size_t r = 0; r < b_rows; ++r) {
      for (std::size_t q = 0; q < b_row; ++q) {
        std::uint16_t bits = 0;
        if (format == BFormat::kBF16) {
          bits = f32_to_bf16(2.0f * uniform(rng));
        } else if (pick(rng) == 0) {
          // f16 subnormals (and zeros), both signs: the decode must get them right.
          bits = static_cast<std::uint16_t>(low_bits(rng) | (pick(rng) & 1 ? 0x8000 : 0));
        } else {
          bits = f32_to_f16(2.0f * uniform(rng));
        }
        p.b_16[r * p.ldb + q] = bits;
      }
    }
  }
  p.b_ref.resize(k * n);
  for (std::size_t q = 0; q < k; ++q) {
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t index = b_transposed ? j * p.ldb + q : q * p.ldb + j;
      switch (format) {
        case BFormat::kF32:
          p.b_ref[q * n + j] = p.b_f32[index];
          break;
        case BFormat::kBF16:
          p.b_ref[q * n + j] = decode_bf16(p.b_16[index]);
          break;
        case BFormat::kF16:
          p.b_ref[q * n + j] = decode_f16(p.b_16[index]);
          break;
      }
    }
  }
  p.c0.assign(kGuard + m * p.ldc + kGuard, kSentinel);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      p.c0[kGuard + i * p.ldc + j] = nan_in_c ? kNaN : uniform(rng);
    }
  }
  return p;
}

// Checks C (with guards) against the reference; returns the largest error / bound seen.
double expect_matches_reference(const Problem& p, const std::vector<float>& c) {
  const auto [m, n, k] = p.shape;
  const double u = std::ldexp(1.0, -24);
  const double alpha = p.scalars.alpha;
  const double beta = p.scalars.beta;
  double worst = 0;
  int failures = 0;
  for (std::size_t i = 0; i < kGuard; ++i) {
    EXPECT_EQ(c[i], kSentinel) << "guard before C, " << i;
    EXPECT_EQ(c[c.size() - 1 - i], kSentinel) << "guard after C, " << i;
  }
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = n; j < p.ldc; ++j) {
      EXPECT_EQ(c[kGuard + i * p.ldc + j], kSentinel) << "row padding of C at " << i << "," << j;
    }
    for (std::size_t j = 0; j < n; ++j) {
      double dot = 0;
      double magnitude = 0;
      if (alpha != 0) {
        for (std::size_t q = 0; q < k; ++q) {
          const double term = double{p.a[i * p.lda + q]} * p.b_value(q, j);
          dot += term;
          magnitude += std::fabs(term);
        }
      }
      const double c_in = p.c0[kGuard + i * p.ldc + j];
      double expected = alpha * dot;
      double scale = std::fabs(alpha) * magnitude;
      if (beta != 0) {
        expected += beta * c_in;
        scale += std::fabs(beta * c_in);
      }
      const double bound = 4.0 * static_cast<double>(k + 4) * u * scale;
      const double got = c[kGuard + i * p.ldc + j];
      const double error = std::fabs(got - expected);
      if (!(error <= bound)) {
        if (++failures <= 5) {
          ADD_FAILURE() << "C[" << i << "," << j << "] = " << got << ", reference " << expected
                        << ", error " << error << " > bound " << bound;
        }
      } else if (bound > 0) {
        worst = std::max(worst, error / bound);
      }
    }
  }
  EXPECT_EQ(failures, 0);
  return worst;
}

// A way to run the GEMM: a public path, or the own GEMM with one named micro-kernel.
struct Variant {
  std::string name;
  std::function<void(const Problem&, float* c, ThreadPool&)> run;
};

void run_public(const Problem& p, float* c, ThreadPool& pool, GemmPath path) {
  const auto [m, n, k] = p.shape;
  const auto [alpha, beta] = p.scalars;
  switch (p.format) {
    case BFormat::kF32:
      gemm_f32(m, n, k, alpha, p.a.data(), p.lda, p.b_f32.data(), p.ldb, p.b_transposed, beta, c,
               p.ldc, pool, path);
      return;
    case BFormat::kBF16:
      gemm_bf16_weights(m, n, k, alpha, p.a.data(), p.lda, p.b_16.data(), p.ldb, beta, c, p.ldc,
                        pool, path);
      return;
    case BFormat::kF16:
      gemm_f16_weights(m, n, k, alpha, p.a.data(), p.lda, p.b_16.data(), p.ldb, beta, c, p.ldc,
                       pool, path);
      return;
  }
}

std::vector<Variant> variants() {
  std::vector<Variant> out;
  if (gemm_path_available(GemmPath::kOpenBlas)) {
    out.push_back({"OpenBLAS", [](const Problem& p, float* c, ThreadPool& pool) {
                     run_public(p, c, pool, GemmPath::kOpenBlas);
                   }});
  }
  out.push_back({"own", [](const Problem& p, float* c, ThreadPool& pool) {
                   run_public(p, c, pool, GemmPath::kOwn);
                 }});
  for (const auto& kernel : gemm_detail::micro_kernels()) {
    out.push_back({"own kernel " + std::string(kernel.name),
                   [&kernel](const Problem& p, float* c, ThreadPool& pool) {
                     const auto [m, n, k] = p.shape;
                     gemm_detail::gemm_own(m, n, k, p.scalars.alpha, p.a.data(), p.lda, p.b(),
                                           p.ldb, p.format, p.b_transposed, p.scalars.beta, c,
                                           p.ldc, pool, kernel);
                   }});
  }
  return out;
}

ThreadPool& test_pool() {
  // More threads than this machine may have: the split is exercised. Never destroyed, as
  // default_thread_pool is not (a static pool's destructor hangs the mingw lane at exit).
  static ThreadPool& pool = *new ThreadPool(3);
  return pool;
}

// Shapes: trivial, empty, odd, exact tile multiples and one past, K above the K panel (256),
// M above a row block (192), N above the N panel (3072), one row, one column.
const std::vector<Shape> kShapes = {
    {1, 1, 1},    {0, 5, 7},     {5, 0, 7},      {5, 7, 0},    {0, 0, 0},    {1, 1, 300},
    {2, 3, 4},    {37, 53, 129}, {8, 32, 256},   {9, 33, 257}, {64, 64, 64}, {100, 1, 50},
    {1, 100, 50}, {17, 19, 1},   {300, 40, 600}, {3, 3100, 5},
};

const std::vector<Scalars> kScalars = {{1.0f, 0.0f},    {1.0f, 1.0f}, {0.5f, -2.0f},
                                       {-1.25f, 0.75f}, {0.0f, 2.0f}, {0.0f, 0.0f}};

// Runs every variant on every shape and scalar pair; beta == 0 cases start from a NaN-filled C.
void check_all(BFormat format, bool b_transposed, std::size_t pad, std::uint32_t seed) {
  double worst = 0;
  int runs = 0;
  for (const Shape& shape : kShapes) {
    for (const Scalars& scalars : kScalars) {
      const bool nan_in_c = scalars.beta == 0.0f;
      const Problem p = make_problem(shape, scalars, format, b_transposed, pad, nan_in_c, seed++);
      for (const Variant& variant : variants()) {
        SCOPED_TRACE(testing::Message()
                     << variant.name << ", " << shape.m << "x" << shape.n << "x" << shape.k
                     << ", alpha " << scalars.alpha << ", beta " << scalars.beta
                     << ", b_transposed " << b_transposed << ", padding " << pad);
        std::vector<float> c = p.c0;
        variant.run(p, c.data() + kGuard, test_pool());
        worst = std::max(worst, expect_matches_reference(p, c));
        ++runs;
      }
    }
  }
  testing::Test::RecordProperty("runs", runs);
  testing::Test::RecordProperty("worst_error_over_bound", std::to_string(worst));
}

TEST(CpuGemm, f32_matches_the_float64_reference_with_b_transposed) {
  check_all(BFormat::kF32, true, 0, 1);
}

TEST(CpuGemm, f32_matches_the_float64_reference_with_b_not_transposed) {
  check_all(BFormat::kF32, false, 0, 1000);
}

TEST(CpuGemm, leading_dimensions_longer_than_a_row_skip_the_padding) {
  check_all(BFormat::kF32, true, 3, 2000);
  check_all(BFormat::kF32, false, 5, 3000);
}

TEST(CpuGemm, bf16_weights_match_the_reference_of_the_decoded_weights) {
  check_all(BFormat::kBF16, true, 0, 4000);
  check_all(BFormat::kBF16, true, 7, 5000);
}

TEST(CpuGemm, f16_weights_with_subnormals_match_the_reference_of_the_decoded_weights) {
  check_all(BFormat::kF16, true, 0, 6000);
  check_all(BFormat::kF16, true, 2, 7000);
}

TEST(CpuGemm, beta_zero_overwrites_nan_and_infinity_in_c) {
  for (const Variant& variant : variants()) {
    SCOPED_TRACE(variant.name);
    Problem p = make_problem({37, 53, 129}, {1.0f, 0.0f}, BFormat::kF32, true, 0, true, 42);
    for (std::size_t i = 0; i < p.c0.size(); i += 2) {
      if (i >= kGuard && i < p.c0.size() - kGuard) p.c0[i] = std::numeric_limits<float>::infinity();
    }
    std::vector<float> c = p.c0;
    variant.run(p, c.data() + kGuard, test_pool());
    for (std::size_t i = kGuard; i < c.size() - kGuard; ++i) ASSERT_TRUE(std::isfinite(c[i]));
    expect_matches_reference(p, c);
  }
}

TEST(CpuGemm, alpha_zero_or_empty_k_scales_c_without_reading_a_or_b) {
  for (const Variant& variant : variants()) {
    SCOPED_TRACE(variant.name);
    for (const Shape shape : {Shape{9, 33, 17}, Shape{9, 33, 0}}) {
      const float alpha = shape.k == 0 ? 1.0f : 0.0f;
      Problem p = make_problem(shape, {alpha, -3.0f}, BFormat::kF32, true, 0, false, 43);
      std::fill(p.a.begin(), p.a.end(), kNaN);
      std::fill(p.b_f32.begin(), p.b_f32.end(), kNaN);
      std::vector<float> c = p.c0;
      variant.run(p, c.data() + kGuard, test_pool());
      for (std::size_t i = 0; i < shape.m; ++i) {
        for (std::size_t j = 0; j < shape.n; ++j) {
          const std::size_t at = kGuard + i * p.ldc + j;
          ASSERT_EQ(c[at], -3.0f * p.c0[at]);
        }
      }
    }
  }
}

TEST(CpuGemm, own_results_are_identical_whatever_the_thread_count) {
  const Problem p = make_problem({300, 700, 600}, {1.0f, 0.5f}, BFormat::kBF16, true, 1, false, 44);
  ThreadPool one(1);
  ThreadPool five(5);
  for (const auto& kernel : gemm_detail::micro_kernels()) {
    SCOPED_TRACE(kernel.name);
    std::vector<float> c1 = p.c0;
    std::vector<float> c5 = p.c0;
    const auto [m, n, k] = p.shape;
    for (auto [pool, c] : {std::pair{&one, &c1}, std::pair{&five, &c5}}) {
      gemm_detail::gemm_own(m, n, k, p.scalars.alpha, p.a.data(), p.lda, p.b(), p.ldb, p.format,
                            true, p.scalars.beta, c->data() + kGuard, p.ldc, *pool, kernel);
    }
    EXPECT_EQ(std::memcmp(c1.data(), c5.data(), c1.size() * sizeof(float)), 0);
    expect_matches_reference(p, c1);
  }
}

TEST(CpuGemm, runs_inside_a_parallel_for_of_the_same_pool) {
  // The CPU backend's attention calls GEMMs from the chunks of a parallel_for.
  ThreadPool& pool = test_pool();
  std::vector<Problem> problems;
  for (std::uint32_t s = 0; s < 6; ++s) {
    problems.push_back(
        make_problem({40, 70, 90}, {1.0f, 0.0f}, BFormat::kF32, true, 0, true, 50 + s));
  }
  std::vector<std::vector<float>> results(problems.size());
  for (const Variant& variant : variants()) {
    SCOPED_TRACE(variant.name);
    pool.parallel_for(problems.size(), 1, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        results[i] = problems[i].c0;
        variant.run(problems[i], results[i].data() + kGuard, pool);
      }
    });
    for (std::size_t i = 0; i < problems.size(); ++i) {
      expect_matches_reference(problems[i], results[i]);
    }
  }
}

TEST(CpuGemm, rejects_leading_dimensions_shorter_than_a_row) {
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 0.0f);
  for (GemmPath path : {GemmPath::kOwn, GemmPath::kOpenBlas}) {
    if (!gemm_path_available(path)) continue;
    auto gemm = [&](std::size_t lda, std::size_t ldb, bool bt, std::size_t ldc) {
      return test::error_code_of([&] {
        gemm_f32(4, 4, 4, 1.0f, a.data(), lda, b.data(), ldb, bt, 0.0f, c.data(), ldc, test_pool(),
                 path);
      });
    };
    EXPECT_EQ(gemm(3, 4, true, 4), ErrorCode::kBadArgument);
    EXPECT_EQ(gemm(4, 3, true, 4), ErrorCode::kBadArgument);
    EXPECT_EQ(gemm(4, 3, false, 4), ErrorCode::kBadArgument);
    EXPECT_EQ(gemm(4, 4, true, 3), ErrorCode::kBadArgument);
    // One row needs no stride: any leading dimension will do.
    EXPECT_NO_THROW(gemm_f32(1, 4, 4, 1.0f, a.data(), 0, b.data(), 4, true, 0.0f, c.data(), 0,
                             test_pool(), path));
  }
}

TEST(CpuGemm, a_path_the_build_lacks_is_refused) {
  if (gemm_path_available(GemmPath::kOpenBlas)) {
    EXPECT_EQ(default_gemm_path(), GemmPath::kOpenBlas);
    GTEST_SKIP() << "this build has OpenBLAS";
  }
  EXPECT_EQ(default_gemm_path(), GemmPath::kOwn);
  float one = 1.0f;
  EXPECT_EQ(test::error_code_of([&] {
              gemm_f32(1, 1, 1, 1.0f, &one, 1, &one, 1, true, 0.0f, &one, 1, test_pool(),
                       GemmPath::kOpenBlas);
            }),
            ErrorCode::kUnsupported);
}

TEST(CpuGemm, the_portable_kernel_is_always_there_and_last) {
  const auto kernels = gemm_detail::micro_kernels();
  ASSERT_FALSE(kernels.empty());
  EXPECT_EQ(kernels.back().name, "portable");
  EXPECT_FALSE(own_gemm_kernel_name().empty());
  for (const auto& kernel : kernels) {
    EXPECT_EQ(kernel.nc % kernel.nr, 0u) << kernel.name;
    EXPECT_EQ(kernel.mc % kernel.mr, 0u) << kernel.name;
    EXPECT_LE(kernel.mr * kernel.nr, gemm_detail::kMaxTile) << kernel.name;
  }
}

}  // namespace
}  // namespace ferry::cpu
