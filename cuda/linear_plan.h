// How CudaBackend::linear (cuda_backend_gemm.cpp) stages one product: the GEMM's input type,
// what it converts into the workspace and where, the blocks, and the order it visits them in.
// Plain C++: the host tests enumerate a model's GEMM calls with it, without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/tensor/dtype.h"
#include "cuda/gemm_plan.h"

namespace ferry::cuda {

inline bool is_16bit_float(DType t) {
  return t == DType::kBF16 || t == DType::kF16;
}
inline bool is_fp8(DType t) {
  return t == DType::kF8E4M3 || t == DType::kF8E5M2;
}

// The GEMM input type linear prefers: 16-bit when both operands' values fit it exactly (x rounded
// to y's dtype, then bf16/f16 x with w of that type or an fp8 w), else f32.
//
// A quantised weight (ggml blocks, bitsandbytes codes) takes bf16 when x's values are bf16: its
// panels are dequantised exactly in f32 and rounded once to bf16 (2^-9 relative per weight, the
// only rounding the CPU backend does not make; the activations keep theirs), so the product runs
// on the bf16 tensor cores with f32 accumulation. Otherwise f32, exact: f32 activations are not
// rounded further, and f16 ones would need weights that can exceed f16's range.
inline DType linear_gemm_type(DType x, DType w, DType y) {
  const DType a_values = y == DType::kF32 ? x : y;  // what round_y(x) holds
  // Dequantised weights (blocks, int8 ConvRot) are bf16 panels when x's values are bf16.
  if (dtype_is_blocked(w) || w == DType::kI8) {
    return a_values == DType::kBF16 ? DType::kBF16 : DType::kF32;
  }
  return is_16bit_float(a_values) && (w == a_values || is_fp8(w)) ? a_values : DType::kF32;
}

struct LinearPlan {
  DType t = DType::kF32;   // the GEMM's input type
  bool convert_x = false;  // x converted to t in row blocks (values or type differ)
  bool convert_w = false;  // w converted to t in panels (fp8 or blocks dequantised, 16-bit widened)
  bool staging = false;    // the product goes through an f32 block; an epilogue adds the bias
  GemmChunks chunks;
  // Byte offsets in the workspace of the x block, the weight panel and the f32 block.
  std::size_t a_block = 0, w_panel = 0, acc = 0;
  // Panels in the outer loop: each converted block stays in the workspace for as long as its
  // loop runs, so the order that converts fewer elements wins.
  bool panels_outer = false;
};

// y[m,n] = x[m,k] · wᵀ with GEMM input type t; nullopt when not even one row fits the workspace.
inline std::optional<LinearPlan> plan_linear(std::int64_t m, std::int64_t k, std::int64_t n,
                                             DType x, DType w, const DType* bias, DType y, DType t,
                                             std::size_t workspace_bytes) {
  LinearPlan p;
  p.t = t;
  p.convert_x = !(x == t && (y == DType::kF32 || y == x));
  p.convert_w = w != t;
  const bool direct = y == t || y == DType::kF32;
  const bool bias_exact = bias != nullptr && (*bias == y || y == DType::kF32);
  p.staging = !direct || (bias != nullptr && !bias_exact);
  const std::size_t t_size = dtype_size(t);
  GemmStaging need;
  need.total_rows = m;
  need.total_panel = n;
  need.a_row_bytes = p.convert_x ? static_cast<std::size_t>(k) * t_size : 0;
  need.w_row_bytes = p.convert_w ? static_cast<std::size_t>(k) * t_size : 0;
  need.staging = p.staging;
  const auto chunks = plan_gemm_chunks(need, workspace_bytes);
  if (!chunks) return std::nullopt;
  p.chunks = *chunks;
  const auto rows = static_cast<std::size_t>(chunks->rows);
  const auto panel = static_cast<std::size_t>(chunks->panel);
  std::size_t used = 0;
  if (p.convert_x) {
    p.a_block = used;
    used += workspace_footprint(rows * need.a_row_bytes);
  }
  if (p.convert_w) {
    p.w_panel = used;
    used += workspace_footprint(panel * need.w_row_bytes);
  }
  p.acc = used;
  // An fp8 3072->14336 layer at 27,280 tokens with an f32 bias: 18 row blocks, 3 panels; rows
  // outer dequantised the weights 18 times, panels outer once.
  const std::int64_t row_blocks = (m + chunks->rows - 1) / chunks->rows;
  const std::int64_t panels = (n + chunks->panel - 1) / chunks->panel;
  const auto converted = [&](bool panels_outer) {
    const std::int64_t x_times = p.convert_x ? (panels_outer && row_blocks > 1 ? panels : 1) : 0;
    const std::int64_t w_times = p.convert_w ? (!panels_outer && panels > 1 ? row_blocks : 1) : 0;
    return x_times * m * k + w_times * n * k;
  };
  p.panels_outer = converted(true) < converted(false);
  return p;
}

// Every block of the product in the plan's order: fn(r0, rows, n0, panel).
template <typename Fn>
void for_each_linear_block(const LinearPlan& p, std::int64_t m, std::int64_t n, Fn&& fn) {
  const std::int64_t rows_step = p.chunks.rows, panel_step = p.chunks.panel;
  const auto rows_at = [&](std::int64_t r0) { return rows_step < m - r0 ? rows_step : m - r0; };
  const auto panel_at = [&](std::int64_t n0) { return panel_step < n - n0 ? panel_step : n - n0; };
  if (p.panels_outer) {
    for (std::int64_t n0 = 0; n0 < n; n0 += panel_step)
      for (std::int64_t r0 = 0; r0 < m; r0 += rows_step) fn(r0, rows_at(r0), n0, panel_at(n0));
  } else {
    for (std::int64_t r0 = 0; r0 < m; r0 += rows_step)
      for (std::int64_t n0 = 0; n0 < n; n0 += panel_step) fn(r0, rows_at(r0), n0, panel_at(n0));
  }
}

}  // namespace ferry::cuda
