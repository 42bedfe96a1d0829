// What CUDA's linear with a quantised weight is compared with, and the bounds (normalised error
// max |cpu − cuda| / max |cpu|): shared by the GPU test (quant_parity_test.cpp) and the host test
// that measures the CPU-side floor of those bounds (quant_host_test.cpp).
//
// linear's GEMM type with a quantised weight is bf16 when x's values are bf16 (then the weight
// panel is the exact f32 dequantisation rounded once to bf16), else f32 with the exact values
// (cuda/linear_plan.h). So a result is compared with the CPU backend's linear on
//   w_ref = the CPU dequantisation, rounded to bf16 where the GEMM is bf16:
// the same products (bf16 · bf16 and f32 · f32 products are exact in f32 on both sides), summed
// in another order. The floor is the f32 summation order, ≈ √K ulps of the terms: f32_sum(K) =
// 1e-6·√K (8·√K ulps) as in backend_parity_test.cpp, at least 1e-5 for the bf16 products (their
// cuBLASLt kernels may split K); with a bf16 output one rounding flip on top, 2^-7 of the largest
// value (a bf16 ulp is at most 2^-7 of the value it rounds).
//
// And against the CPU backend's linear on the quantised weight itself (which multiplies its
// exact values, as the f32 path does): the bf16 rounding of the weights is bounded by
// |Δy_ij| ≤ Σ_k |x_ik| · |w_jk − bf16(w_jk)| (each product moves by at most its term), computed in
// f64 from the case's own data, normalised by max |y|, plus the bound above.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/tensor/convert.h"
#include "core/tensor/quant.h"

namespace ferry::test {

inline double f32_sum(std::int64_t k) {
  return 1e-6 * std::sqrt(static_cast<double>(std::max<std::int64_t>(k, 1)));
}

inline Tensor host_tensor(DType dtype, Shape shape, const void* data) {
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.data = const_cast<void*>(data);
  t.device = Device::kCpu;
  return t;
}

inline std::vector<float> as_f32(DType dtype, const void* bytes, std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  convert_to_f32(dtype, bytes, v.data(), v.size());
  return v;
}

// n values uniform in [-1, 1], stored as dtype.
inline std::vector<std::uint8_t> random_values(DType dtype, std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(n));
  for (float& v : values) v = dist(rng);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(n) * dtype_size(dtype));
  convert_from_f32(values.data(), dtype, bytes.data(), values.size());
  return bytes;
}

// Normalised error of got against want, NaN-aware: a NaN where want has none (or an element
// never written) is an infinite error. `where` names the worst element.
inline double normalised_error(const std::vector<float>& want, const std::vector<float>& got,
                               std::string* where) {
  double max_a = 0, max_diff = 0;
  for (float a : want)
    if (std::isfinite(a)) max_a = std::max(max_a, static_cast<double>(std::fabs(a)));
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) != std::isnan(got[i])) {
      *where = "element " + std::to_string(i) + ": cpu " + std::to_string(want[i]) + ", cuda " +
               std::to_string(got[i]);
      return INFINITY;
    }
    const double diff = std::fabs(static_cast<double>(want[i]) - static_cast<double>(got[i]));
    if (diff > max_diff) {
      max_diff = diff;
      *where = "element " + std::to_string(i) + ": cpu " + std::to_string(want[i]) + ", cuda " +
               std::to_string(got[i]);
    }
  }
  return max_diff / std::max(1e-6, max_a);
}

struct LinearCase {
  DType x, y;
  bool bias;
  DType b;
};

// The cases every quantised type runs: each path linear takes from a quantised weight.
inline constexpr LinearCase kLinearCases[] = {
    {DType::kBF16, DType::kBF16, true, DType::kBF16},  // bf16 GEMM, bias preloaded
    {DType::kF32, DType::kBF16, true, DType::kF32},    // x rounded to bf16, staged epilogue
    {DType::kBF16, DType::kF32, false, DType::kF32},   // bf16 GEMM, f32 out
    {DType::kF32, DType::kF32, true, DType::kF32},     // f32 GEMM on the exact weights
};

// The CPU's results for y[m,n] = x · wᵀ + b, w [n, k] the quantised weight w_quant (host
// memory, with its scaling) whose exact f32 values are w_exact.
struct LinearReference {
  bool bf16_gemm = false;         // the GEMM type CUDA picks (linear_gemm_type) is bf16
  std::vector<float> x_gemm;      // x as the GEMM sees it: rounded to y's dtype
  std::vector<float> w_gemm;      // w as the GEMM sees it: bf16-rounded or exact
  std::vector<float> want;        // the CPU's linear on w_gemm
  std::vector<float> want_exact;  // the CPU backend's linear on the quantised weight itself
  double threshold = 0;           // against want
  double rounding_bound = 0;      // added against want_exact (0 unless bf16_gemm)
};

inline LinearReference linear_reference(cpu::CpuBackend& cpu, const LinearCase& c, std::int64_t m,
                                        std::int64_t k, std::int64_t n,
                                        const std::vector<std::uint8_t>& x_bytes,
                                        const std::vector<std::uint8_t>& b_bytes,
                                        const Tensor& w_quant, const WeightScaling& w_scaling,
                                        const std::vector<float>& w_exact) {
  LinearReference r;
  const DType x_values = c.y == DType::kF32 ? c.x : c.y;  // round_y(x)
  r.bf16_gemm = x_values == DType::kBF16;
  const std::vector<float> x = as_f32(c.x, x_bytes.data(), m * k);
  r.x_gemm.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) r.x_gemm[i] = round_to(x_values, x[i]);
  std::vector<std::uint8_t> w_bf16(w_exact.size() * 2);
  convert_from_f32(w_exact.data(), DType::kBF16, w_bf16.data(), w_exact.size());
  r.w_gemm = r.bf16_gemm ? as_f32(DType::kBF16, w_bf16.data(), n * k) : w_exact;

  const Tensor x_cpu = host_tensor(c.x, {m, k}, x_bytes.data());
  const Tensor b_cpu = host_tensor(c.b, {n}, b_bytes.data());
  const auto run = [&](const Tensor& w, const WeightScaling& s) {
    std::vector<std::uint8_t> y(static_cast<std::size_t>(m * n) * dtype_size(c.y));
    cpu.linear(x_cpu, w, c.bias ? &b_cpu : nullptr, host_tensor(c.y, {m, n}, y.data()), s);
    return as_f32(c.y, y.data(), m * n);
  };
  r.want_exact = run(w_quant, w_scaling);
  r.want = r.bf16_gemm ? run(host_tensor(DType::kBF16, {n, k}, w_bf16.data()), {}) : r.want_exact;
  const double sum_floor = r.bf16_gemm ? std::max(f32_sum(k), 1e-5) : f32_sum(k);
  r.threshold = sum_floor + (c.y == DType::kBF16 ? 0x1p-7 : 0.0);
  if (!r.bf16_gemm) return r;

  double worst = 0, max_y = 1e-6;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t l = 0; l < k; ++l) {
        const auto w = static_cast<std::size_t>(j * k + l);
        s += std::fabs(static_cast<double>(r.x_gemm[static_cast<std::size_t>(i * k + l)])) *
             std::fabs(static_cast<double>(w_exact[w]) - static_cast<double>(r.w_gemm[w]));
      }
      worst = std::max(worst, s);
    }
  }
  for (float v : r.want_exact) max_y = std::max(max_y, static_cast<double>(std::fabs(v)));
  r.rounding_bound = worst / max_y;
  return r;
}

}  // namespace ferry::test
