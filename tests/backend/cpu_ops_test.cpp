// The CPU backend's ops against float64 references written out in the tests (or hand-computed
// values): the reference every other backend is then compared with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <utility>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/memory/arena.h"
#include "core/tensor/convert.h"
#include "tests/backend/host_tensor.h"
#include "tests/test_support.h"

namespace ferry::cpu {
namespace {

using test::HostTensor;
using test::random_values;

// The values as stored in `dtype`.
std::vector<float> rounded(std::vector<float> v, DType dtype) {
  for (float& x : v) x = round_to(dtype, x);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << " element " << i;
  }
}

CpuBackend& backend() {
  static CpuBackend cpu;
  return cpu;
}

// ---- linear ----

struct LinearCase {
  DType weight;
  DType out;
  float scale;
};

class CpuLinear : public ::testing::TestWithParam<LinearCase> {};

TEST_P(CpuLinear, matches_a_float64_product_of_the_rounded_operands) {
  const auto [wdt, ydt, scale] = GetParam();
  for (const auto [m, k, n] : {std::array<std::int64_t, 3>{1, 1, 1}, {37, 53, 129}, {64, 256, 31}}) {
    const auto xv = random_values(static_cast<std::size_t>(m * k), 1);
    const auto wv = rounded(random_values(static_cast<std::size_t>(n * k), 2), wdt);
    const auto bv = random_values(static_cast<std::size_t>(n), 3);
    HostTensor x(DType::kF32, {m, k}, xv);
    HostTensor w(wdt, {n, k}, wv);
    HostTensor b(DType::kF32, {n}, bv);
    HostTensor y(ydt, {m, n});
    backend().linear(x.t, w.t, &b.t, y.t, scale);
    // x is rounded to the output dtype first (a bf16 op has bf16 inputs).
    const auto xr = rounded(xv, ydt);
    std::vector<double> want(static_cast<std::size_t>(m * n));
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          acc += static_cast<double>(xr[static_cast<std::size_t>(i * k + p)]) *
                 (static_cast<double>(scale) * wv[static_cast<std::size_t>(j * k + p)]);
        }
        want[static_cast<std::size_t>(i * n + j)] = acc + bv[static_cast<std::size_t>(j)];
      }
    }
    // f32 accumulation over k terms of size ≤ 1, then one rounding to the output dtype.
    const double tol = static_cast<double>(k) * 2e-7 + (ydt == DType::kF32 ? 1e-6 : 1.0 / 256);
    expect_close(y.values(), want, tol, "linear");
  }
}

INSTANTIATE_TEST_SUITE_P(
    WeightsAndOutputs, CpuLinear,
    ::testing::Values(LinearCase{DType::kF32, DType::kF32, 1.0f},
                      LinearCase{DType::kBF16, DType::kF32, 1.0f},
                      LinearCase{DType::kBF16, DType::kBF16, 1.0f},
                      LinearCase{DType::kF16, DType::kF16, 1.0f},
                      LinearCase{DType::kF8E4M3, DType::kBF16, 0.03125f},
                      LinearCase{DType::kF8E5M2, DType::kF32, 2.0f}),
    [](const ::testing::TestParamInfo<LinearCase>& param_info) {
      return std::string(dtype_name(param_info.param.weight)) + "_to_" +
             std::string(dtype_name(param_info.param.out));
    });

TEST_P(CpuLinear, linear_add_adds_the_product_to_y_and_rounds_once) {
  const auto [wdt, ydt, scale] = GetParam();
  const std::int64_t m = 29, k = 64, n = 45;
  const auto xv = random_values(static_cast<std::size_t>(m * k), 4);
  const auto wv = rounded(random_values(static_cast<std::size_t>(n * k), 5), wdt);
  const auto yv = rounded(random_values(static_cast<std::size_t>(m * n), 6), ydt);
  HostTensor x(DType::kF32, {m, k}, xv);
  HostTensor w(wdt, {n, k}, wv);
  HostTensor y(ydt, {m, n}, yv);
  backend().linear_add(x.t, w.t, y.t, scale);
  const auto xr = rounded(xv, ydt);
  std::vector<double> want(yv.begin(), yv.end());
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        acc += static_cast<double>(xr[static_cast<std::size_t>(i * k + p)]) *
               (static_cast<double>(scale) * wv[static_cast<std::size_t>(j * k + p)]);
      }
      want[static_cast<std::size_t>(i * n + j)] += acc;
    }
  }
  const double tol = static_cast<double>(k) * 2e-7 + (ydt == DType::kF32 ? 1e-6 : 1.0 / 256);
  expect_close(y.values(), want, tol, "linear_add");
}

TEST(CpuElementwise, add_scaled_adds_alpha_times_y_in_place) {
  const std::int64_t rows = 4, cols = 9;
  const auto xv = rounded(random_values(rows * cols, 17), DType::kBF16);
  const auto yv = random_values(rows * cols, 18);
  HostTensor x(DType::kBF16, {rows, cols}, xv);
  HostTensor y(DType::kF32, {rows, cols}, yv);
  backend().add_scaled(x.t, y.t, -0.6f);
  std::vector<double> want(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) want[i] = xv[i] + -0.6 * double(yv[i]);
  expect_close(x.values(), want, 1.0 / 256, "add_scaled");
  HostTensor other(DType::kF32, {rows, cols + 1});
  EXPECT_THROW(backend().add_scaled(x.t, other.t, 1.0f), Error);
}

TEST(CpuLinear, refuses_mismatched_shapes) {
  HostTensor x(DType::kF32, {4, 8});
  HostTensor w(DType::kF32, {5, 7});
  HostTensor y(DType::kF32, {4, 5});
  EXPECT_THROW(backend().linear(x.t, w.t, nullptr, y.t, 1.0f), Error);
}

// ---- normalisation ----

TEST(CpuNorms, rms_norm_rounds_the_normalised_value_to_the_input_dtype_before_the_weight) {
  const std::int64_t rows = 5, cols = 96;
  const auto xv = rounded(random_values(rows * cols, 4, -3, 3), DType::kBF16);
  const auto gv = random_values(cols, 5);
  HostTensor x(DType::kBF16, {rows, cols}, xv);
  HostTensor g(DType::kF32, {cols}, gv);
  HostTensor y(DType::kF32, {rows, cols});
  backend().rms_norm(x.t, g.t, 1e-6f, y.t);
  std::vector<double> want(xv.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t c = 0; c < cols; ++c) ss += double(xv[r * cols + c]) * xv[r * cols + c];
    const double inv = 1.0 / std::sqrt(ss / cols + 1e-6);
    for (std::int64_t c = 0; c < cols; ++c) {
      want[r * cols + c] = round_to(DType::kBF16, static_cast<float>(xv[r * cols + c] * inv)) *
                           static_cast<double>(gv[c]);
    }
  }
  expect_close(y.values(), want, 1e-6, "rms_norm");
}

TEST(CpuNorms, layer_norm_with_and_without_affine) {
  const std::int64_t rows = 3, cols = 1001;
  const auto xv = random_values(rows * cols, 6, -2, 5);
  const auto wv = random_values(cols, 7);
  const auto bv = random_values(cols, 8);
  HostTensor x(DType::kF32, {rows, cols}, xv);
  HostTensor w(DType::kF32, {cols}, wv);
  HostTensor b(DType::kF32, {cols}, bv);
  HostTensor plain(DType::kF32, {rows, cols});
  HostTensor affine(DType::kF32, {rows, cols});
  backend().layer_norm(x.t, nullptr, nullptr, 1e-6f, plain.t);
  backend().layer_norm(x.t, &w.t, &b.t, 1e-6f, affine.t);
  std::vector<double> want_plain(xv.size()), want_affine(xv.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (std::int64_t c = 0; c < cols; ++c) mean += xv[r * cols + c];
    mean /= cols;
    for (std::int64_t c = 0; c < cols; ++c) var += std::pow(xv[r * cols + c] - mean, 2);
    var /= cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double n = (xv[r * cols + c] - mean) / std::sqrt(var + 1e-6);
      want_plain[r * cols + c] = n;
      want_affine[r * cols + c] = n * wv[c] + bv[c];
    }
  }
  expect_close(plain.values(), want_plain, 1e-6, "layer_norm");
  expect_close(affine.values(), want_affine, 1e-6, "layer_norm affine");
}

TEST(CpuNorms, channel_rms_norm_normalises_each_position_over_channels) {
  const std::int64_t channels = 12, positions = 2500;  // more than one task of positions
  auto xv = random_values(channels * positions, 9);
  for (std::int64_t c = 0; c < channels; ++c) xv[c * positions + 7] = 0;  // an all-zero position
  const auto gv = random_values(channels, 10);
  HostTensor x(DType::kF32, {channels, 50, 50}, xv);
  HostTensor g(DType::kF32, {channels}, gv);
  HostTensor y(DType::kF32, {channels, 50, 50});
  backend().channel_rms_norm(x.t, g.t, y.t);
  std::vector<double> want(xv.size());
  for (std::int64_t s = 0; s < positions; ++s) {
    double ss = 0;
    for (std::int64_t c = 0; c < channels; ++c) ss += std::pow(xv[c * positions + s], 2);
    const double norm = std::max(std::sqrt(ss), 1e-12);
    for (std::int64_t c = 0; c < channels; ++c) {
      want[c * positions + s] = xv[c * positions + s] / norm * std::sqrt(double(channels)) * gv[c];
    }
  }
  expect_close(y.values(), want, 1e-6, "channel_rms_norm");
  EXPECT_EQ(y.values()[7], 0.0f);
}

// ---- elementwise ----

TEST(CpuElementwise, modulate_takes_one_row_or_one_per_row) {
  const std::int64_t rows = 4, cols = 10;
  const auto xv = random_values(rows * cols, 11);
  const auto row_scale = random_values(cols, 12);
  const auto per_row_shift = random_values(rows * cols, 13);
  HostTensor x(DType::kF32, {rows, cols}, xv);
  HostTensor scale(DType::kF32, {1, cols}, row_scale);
  HostTensor shift(DType::kF32, {rows, cols}, per_row_shift);
  HostTensor y(DType::kBF16, {rows, cols});
  backend().modulate(x.t, scale.t, shift.t, y.t);
  std::vector<double> want(xv.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      want[r * cols + c] = round_to(DType::kBF16, xv[r * cols + c] * (1 + row_scale[c]) +
                                                      per_row_shift[r * cols + c]);
    }
  }
  expect_close(y.values(), want, 1e-6, "modulate");
  HostTensor bad(DType::kF32, {3});
  EXPECT_THROW(backend().modulate(x.t, bad.t, shift.t, y.t), Error);
}

TEST(CpuElementwise, gated_add_updates_the_residual_in_place) {
  const std::int64_t rows = 3, cols = 7;
  const auto xv = random_values(rows * cols, 14);
  const auto yv = rounded(random_values(rows * cols, 15), DType::kBF16);
  const auto gv = random_values(cols, 16);
  HostTensor x(DType::kF32, {rows, cols}, xv);
  HostTensor y(DType::kBF16, {rows, cols}, yv);
  HostTensor g(DType::kF32, {cols}, gv);
  backend().gated_add(x.t, y.t, &g.t);
  std::vector<double> want(xv.size());
  for (std::int64_t i = 0; i < rows * cols; ++i) want[i] = xv[i] + double(yv[i]) * gv[i % cols];
  expect_close(x.values(), want, 1e-6, "gated_add");
  backend().gated_add(x.t, y.t, nullptr);
  for (std::int64_t i = 0; i < rows * cols; ++i) want[i] += yv[i];
  expect_close(x.values(), want, 1e-6, "residual add");
}

TEST(CpuElementwise, activations_softmax_add_mul_convert) {
  const std::int64_t rows = 3, cols = 33;
  const auto av = random_values(rows * cols, 17, -6, 6);
  const auto bv = random_values(rows * cols, 18, -2, 2);
  HostTensor a(DType::kF32, {rows, cols}, av);
  HostTensor b(DType::kF32, {rows, cols}, bv);
  HostTensor out(DType::kF32, {rows, cols});
  std::vector<double> want(av.size());

  backend().gelu_tanh(a.t, out.t);
  for (std::size_t i = 0; i < av.size(); ++i) {
    const double x = av[i];
    want[i] = 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  }
  expect_close(out.values(), want, 2e-6, "gelu_tanh");

  backend().gelu_erf(a.t, out.t);
  for (std::size_t i = 0; i < av.size(); ++i) {
    const double x = av[i];
    want[i] = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  }
  expect_close(out.values(), want, 2e-6, "gelu_erf");

  backend().silu(a.t, out.t);
  for (std::size_t i = 0; i < av.size(); ++i) want[i] = av[i] / (1 + std::exp(-double(av[i])));
  expect_close(out.values(), want, 2e-6, "silu");

  backend().clamp(a.t, 0.0f, std::numeric_limits<float>::infinity(), out.t);
  for (std::size_t i = 0; i < av.size(); ++i) want[i] = std::max(0.0f, av[i]);
  expect_close(out.values(), want, 0, "clamp as ReLU");
  backend().clamp(a.t, -1.5f, 2.0f, out.t);
  for (std::size_t i = 0; i < av.size(); ++i) want[i] = std::clamp(av[i], -1.5f, 2.0f);
  expect_close(out.values(), want, 0, "clamp");
  backend().tanh_clamp(a.t, 3.0f, out.t);
  for (std::size_t i = 0; i < av.size(); ++i) want[i] = 3 * std::tanh(av[i] / 3.0);
  expect_close(out.values(), want, 2e-6, "tanh_clamp");

  backend().softmax(a.t, out.t);
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (std::int64_t c = 0; c < cols; ++c) sum += std::exp(double(av[r * cols + c]));
    for (std::int64_t c = 0; c < cols; ++c) want[r * cols + c] = std::exp(double(av[r * cols + c])) / sum;
  }
  expect_close(out.values(), want, 1e-6, "softmax");

  backend().add(a.t, b.t, out.t);
  for (std::size_t i = 0; i < av.size(); ++i) want[i] = double(av[i]) + bv[i];
  expect_close(out.values(), want, 1e-7, "add");
  backend().mul(a.t, b.t, out.t);
  for (std::size_t i = 0; i < av.size(); ++i) want[i] = double(av[i]) * bv[i];
  expect_close(out.values(), want, 1e-7, "mul");

  HostTensor half(DType::kF16, {rows, cols});
  backend().convert(a.t, half.t);
  for (std::size_t i = 0; i < av.size(); ++i) want[i] = round_to(DType::kF16, av[i]);
  expect_close(half.values(), want, 0, "convert");
}

// ---- attention ----

std::vector<double> naive_attention(const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, std::int64_t len,
                                    std::int64_t keys, std::int64_t heads, std::int64_t dim,
                                    double scale, const std::vector<float>* rel,
                                    std::int64_t kv_heads = 0, bool causal = false) {
  if (kv_heads == 0) kv_heads = heads;
  std::vector<double> o(static_cast<std::size_t>(len * heads * dim));
  for (std::int64_t h = 0; h < heads; ++h) {
    const std::int64_t kvh = h / (heads / kv_heads);
    for (std::int64_t i = 0; i < len; ++i) {
      std::vector<double> s(static_cast<std::size_t>(keys));
      for (std::int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (std::int64_t d = 0; d < dim; ++d) {
          dot += double(q[(i * heads + h) * dim + d]) * k[(j * kv_heads + kvh) * dim + d];
        }
        s[j] = dot * scale + (rel ? (*rel)[t5_relative_bucket(j - i) * heads + h] : 0.0);
        if (causal && j > i) s[j] = -INFINITY;
      }
      const double top = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - top));
      for (std::int64_t d = 0; d < dim; ++d) {
        double acc = 0;
        for (std::int64_t j = 0; j < keys; ++j)
          acc += s[j] / sum * v[(j * kv_heads + kvh) * dim + d];
        o[(i * heads + h) * dim + d] = acc;
      }
    }
  }
  return o;
}

TEST(CpuAttention, matches_naive_softmax_attention_across_query_blocks) {
  const std::int64_t len = 70, keys = 23, heads = 3, dim = 16;
  const auto qv = random_values(len * heads * dim, 20);
  const auto kv = random_values(keys * heads * dim, 21);
  const auto vv = random_values(keys * heads * dim, 22);
  HostTensor q(DType::kF32, {len, heads, dim}, qv);
  HostTensor k(DType::kF32, {keys, heads, dim}, kv);
  HostTensor v(DType::kF32, {keys, heads, dim}, vv);
  HostTensor o(DType::kF32, {len, heads, dim});
  const float scale = 1.0f / std::sqrt(float(dim));
  backend().attention(q.t, k.t, v.t, scale, nullptr, false, o.t);
  expect_close(o.values(), naive_attention(qv, kv, vv, len, keys, heads, dim, scale, nullptr), 1e-5,
               "attention");
}

// Qwen3's decoder attention: 6 query heads sharing 2 key/value heads (heads 0-2 read kv head 0),
// causal, over more rows than one query block so blocks see different key counts.
TEST(CpuAttention, shares_kv_heads_across_query_groups_and_masks_future_keys) {
  const std::int64_t len = 75, heads = 6, kv_heads = 2, dim = 16;
  const auto qv = random_values(len * heads * dim, 30);
  const auto kv = random_values(len * kv_heads * dim, 31);
  const auto vv = random_values(len * kv_heads * dim, 32);
  HostTensor q(DType::kF32, {len, heads, dim}, qv);
  HostTensor k(DType::kF32, {len, kv_heads, dim}, kv);
  HostTensor v(DType::kF32, {len, kv_heads, dim}, vv);
  HostTensor o(DType::kF32, {len, heads, dim});
  const float scale = 0.25f;
  backend().attention(q.t, k.t, v.t, scale, nullptr, true, o.t);
  expect_close(o.values(),
               naive_attention(qv, kv, vv, len, len, heads, dim, scale, nullptr, kv_heads, true),
               1e-5, "causal gqa attention");
  backend().attention(q.t, k.t, v.t, scale, nullptr, false, o.t);
  expect_close(o.values(),
               naive_attention(qv, kv, vv, len, len, heads, dim, scale, nullptr, kv_heads, false),
               1e-5, "gqa attention");
  // Heads that do not group evenly, and a causal mask over unequal lengths, are caller bugs.
  HostTensor k5(DType::kF32, {len, 4, dim});
  EXPECT_THROW(backend().attention(q.t, k5.t, k5.t, scale, nullptr, false, o.t), Error);
  HostTensor q2(DType::kF32, {len - 1, heads, dim});
  HostTensor o2(DType::kF32, {len - 1, heads, dim});
  EXPECT_THROW(backend().attention(q2.t, k.t, v.t, scale, nullptr, true, o2.t), Error);
}

// Rotation by halves: (x[j], x[j + D/2]) turned by the table's angle of row l, every head alike.
TEST(CpuRope, rope_halves_rotates_each_half_pair_by_its_row_angle) {
  const std::int64_t len = 5, heads = 3, dim = 8, half = dim / 2;
  const auto xv = random_values(len * heads * dim, 40);
  std::vector<float> cv(len * half), sv(len * half);
  for (std::int64_t l = 0; l < len; ++l) {
    for (std::int64_t j = 0; j < half; ++j) {
      const double angle = 0.7 * double(l) + 0.3 * double(j);
      cv[l * half + j] = static_cast<float>(std::cos(angle));
      sv[l * half + j] = static_cast<float>(std::sin(angle));
    }
  }
  HostTensor x(DType::kF32, {len, heads, dim}, xv);
  HostTensor c(DType::kF32, {len, half}, cv);
  HostTensor s(DType::kF32, {len, half}, sv);
  backend().rope_halves(x.t, c.t, s.t);
  std::vector<double> want(xv.size());
  for (std::int64_t l = 0; l < len; ++l) {
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t j = 0; j < half; ++j) {
        const std::size_t a = (l * heads + h) * dim + j, b = a + half;
        const double co = cv[l * half + j], si = sv[l * half + j];
        want[a] = xv[a] * co - xv[b] * si;
        want[b] = xv[b] * co + xv[a] * si;
      }
    }
  }
  expect_close(x.values(), want, 1e-6, "rope_halves");
  HostTensor wrong(DType::kF32, {len, half + 1});
  EXPECT_THROW(backend().rope_halves(x.t, wrong.t, s.t), Error);
}

// A table narrower than half the head (H3's DiT: 48 angles for heads of 128) rotates the pairs
// (j, j + R/2) of the first R dims and leaves the others exactly as they were.
TEST(CpuRope, rope_halves_with_a_narrow_table_rotates_the_leading_dims_only) {
  const std::int64_t len = 4, heads = 2, dim = 16, half = 6;
  const auto xv = random_values(len * heads * dim, 41);
  std::vector<float> cv(len * half), sv(len * half);
  for (std::int64_t l = 0; l < len; ++l) {
    for (std::int64_t j = 0; j < half; ++j) {
      const double angle = 0.9 * double(l) - 0.2 * double(j);
      cv[l * half + j] = static_cast<float>(std::cos(angle));
      sv[l * half + j] = static_cast<float>(std::sin(angle));
    }
  }
  HostTensor x(DType::kF32, {len, heads, dim}, xv);
  HostTensor c(DType::kF32, {len, half}, cv);
  HostTensor s(DType::kF32, {len, half}, sv);
  backend().rope_halves(x.t, c.t, s.t);
  std::vector<double> want(xv.begin(), xv.end());
  for (std::int64_t l = 0; l < len; ++l) {
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t j = 0; j < half; ++j) {
        const std::size_t a = (l * heads + h) * dim + j, b = a + half;
        const double co = cv[l * half + j], si = sv[l * half + j];
        want[a] = xv[a] * co - xv[b] * si;
        want[b] = xv[b] * co + xv[a] * si;
      }
    }
  }
  expect_close(x.values(), want, 1e-6, "partial rope_halves");
  HostTensor too_wide(DType::kF32, {len, dim / 2 + 1});
  EXPECT_THROW(backend().rope_halves(x.t, too_wide.t, too_wide.t), Error);
}

TEST(CpuAttention, adds_the_t5_relative_position_bias_without_scaling) {
  const std::int64_t len = 150, heads = 2, dim = 8;  // distances beyond 128 reach the last bucket
  const auto qv = random_values(len * heads * dim, 23);
  const auto kv = random_values(len * heads * dim, 24);
  const auto vv = random_values(len * heads * dim, 25);
  const auto rel = random_values(32 * heads, 26, -3, 3);
  HostTensor q(DType::kF32, {len, heads, dim}, qv);
  HostTensor k(DType::kF32, {len, heads, dim}, kv);
  HostTensor v(DType::kF32, {len, heads, dim}, vv);
  HostTensor r(DType::kF32, {32, heads}, rel);
  HostTensor o(DType::kF32, {len, heads, dim});
  backend().attention(q.t, k.t, v.t, 1.0f, &r.t, false, o.t);
  expect_close(o.values(), naive_attention(qv, kv, vv, len, len, heads, dim, 1.0, &rel), 1e-5,
               "t5 attention");
}

TEST(CpuAttention, t5_buckets_follow_the_reference_table) {
  // wan.md §A.2: |r| 0..7 -> |r|; 8–11 -> 8; 12–15 -> 9; 16–22 -> 10; 23–31 -> 11; 32–45 -> 12;
  // 46–63 -> 13; 64–90 -> 14; >= 91 -> 15; +16 for keys after the query.
  const std::pair<int, int> table[] = {{0, 0},   {7, 7},   {8, 8},   {11, 8},  {12, 9},
                                       {15, 9},  {16, 10}, {22, 10}, {23, 11}, {31, 11},
                                       {32, 12}, {45, 12}, {46, 13}, {63, 13}, {64, 14},
                                       {90, 14}, {91, 15}, {1000, 15}};
  for (const auto& [distance, bucket] : table) {
    EXPECT_EQ(t5_relative_bucket(-distance), bucket) << -distance;
    if (distance > 0) {
      EXPECT_EQ(t5_relative_bucket(distance), bucket + 16) << distance;
    }
  }
}

// ---- rope ----

TEST(CpuRope, rotates_interleaved_pairs_by_frame_row_and_column_angles) {
  const RopeGrid grid{3, 4, 5};
  const std::int64_t len = 60, heads = 2, dim = 128;
  const auto xv = random_values(len * heads * dim, 27);
  HostTensor x(DType::kF32, {len, heads, dim}, xv);
  backend().rope_3d(x.t, grid);
  std::vector<double> want(xv.size());
  for (std::int64_t n = 0; n < len; ++n) {
    const std::int64_t pos[3] = {n / 20, (n / 5) % 4, n % 5};
    for (std::int64_t p = 0; p < 64; ++p) {
      // 22 pairs for frames (44 real dims), then 21 for rows and 21 for columns.
      const int axis = p < 22 ? 0 : p < 43 ? 1 : 2;
      const std::int64_t j = p - (axis == 0 ? 0 : axis == 1 ? 22 : 43);
      const double width = axis == 0 ? 44 : 42;
      const double angle = pos[axis] * std::pow(10000.0, -2.0 * j / width);
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::size_t i = static_cast<std::size_t>((n * heads + h) * dim + 2 * p);
        want[i] = xv[i] * std::cos(angle) - xv[i + 1] * std::sin(angle);
        want[i + 1] = xv[i] * std::sin(angle) + xv[i + 1] * std::cos(angle);
      }
    }
  }
  expect_close(x.values(), want, 1e-6, "rope_3d");
  HostTensor wrong(DType::kF32, {61, heads, dim});
  EXPECT_THROW(backend().rope_3d(wrong.t, grid), Error);
}

// A run of the tokens (the DiT's token chunks) is rotated as those rows of the whole grid are.
TEST(CpuRope, a_run_of_tokens_rotates_as_the_whole_grid_does) {
  const std::int64_t len = 60, heads = 2, dim = 128;
  const auto xv = random_values(len * heads * dim, 31);
  HostTensor whole(DType::kF32, {len, heads, dim}, xv);
  backend().rope_3d(whole.t, RopeGrid{3, 4, 5});
  for (const auto& [first, count] :
       {std::pair<std::int64_t, std::int64_t>{0, 7}, {13, 21}, {59, 1}}) {
    const auto begin = xv.begin() + first * heads * dim;
    HostTensor run(DType::kF32, {count, heads, dim},
                   std::vector<float>(begin, begin + count * heads * dim));
    backend().rope_3d(run.t, RopeGrid{3, 4, 5, first});
    const auto got = run.values();
    const auto want = whole.values();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin() + first * heads * dim))
        << "tokens " << first << " + " << count;
  }
  HostTensor past(DType::kF32, {2, heads, dim}, std::vector<float>(2 * heads * dim, 1.0f));
  EXPECT_EQ(test::error_code_of([&] {
              backend().rope_3d(past.t, RopeGrid{3, 4, 5, 59});
            }),
            ErrorCode::kInternal);  // a caller's fault: the op's shape check
}

// ---- arena ----

TEST(Arena, hands_out_aligned_tensors_and_refuses_past_its_capacity) {
  std::vector<std::byte> block(4096 + memory::Arena::kAlignment);
  void* base = block.data() + (memory::Arena::kAlignment -
                               reinterpret_cast<std::uintptr_t>(block.data()) % memory::Arena::kAlignment);
  memory::Arena arena(base, 4096, Device::kCpu);
  const Tensor a = arena.allocate(DType::kF32, {10});
  const std::size_t mark = arena.mark();
  const Tensor b = arena.allocate(DType::kBF16, {3, 5});
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data) % memory::Arena::kAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data) % memory::Arena::kAlignment, 0u);
  EXPECT_EQ(arena.used(), 2 * memory::Arena::kAlignment);
  try {
    (void)arena.allocate(DType::kF32, {1024});
    FAIL() << "the arena gave out more than it holds";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
  }
  arena.release_to(mark);
  EXPECT_EQ(arena.allocate(DType::kBF16, {3, 5}).data, b.data);
  EXPECT_EQ(arena.peak(), 2 * memory::Arena::kAlignment);
  EXPECT_THROW(arena.release_to(arena.used() + 1), Error);
}

TEST(Tensor, rows_and_reshapes_are_views_of_the_same_memory) {
  HostTensor x(DType::kBF16, {4, 3, 2});
  const Tensor r = x.t.rows(1, 3);
  EXPECT_EQ(r.shape, (Shape{2, 3, 2}));
  EXPECT_EQ(static_cast<std::byte*>(r.data) - static_cast<std::byte*>(x.t.data), 12);
  EXPECT_EQ(x.t.reshaped({12, 2}).shape.rows(), 12);
  EXPECT_THROW((void)x.t.reshaped({5, 5}), Error);
  EXPECT_THROW((void)x.t.rows(3, 5), Error);
}

}  // namespace
}  // namespace ferry::cpu
