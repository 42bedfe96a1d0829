// The shape rules of the Backend ops, checked once here for every backend: each returns the
// sizes the op works with, or throws Error(kInternal) naming the op and the mismatch.
#pragma once

#include <cstdint>
#include <utility>

#include "core/backend/backend.h"

namespace ferry {

struct LinearShape {
  std::int64_t m, k, n;  // y[m,n] = x[m,k] · w[n,k]ᵀ
};
LinearShape check_linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y);

struct AttentionShape {
  std::int64_t len, keys, heads, dim;  // q/o [len,heads,dim], k/v [keys,kv_heads,dim]
  std::int64_t kv_heads;               // divides heads
};
AttentionShape check_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor* relative_bias, bool causal, const Tensor& o);

struct Conv3dShape {
  std::int64_t ci, t, h, w;      // input
  std::int64_t co, kt, kh, kw;   // weight
  std::int64_t to, ho, wo;       // output
};
Conv3dShape check_conv3d(const Tensor& x, const Tensor& w, const Tensor* bias,
                         const Conv3dParams& params, const Tensor& y);

// snake_beta_alias_free: x and y [C, T], alpha and beta [C] F32, filters F32 [2, 12].
void check_snake_beta(const Tensor& x, const Tensor& alpha, const Tensor& beta,
                      const Tensor& filters, const Tensor& y);

struct RopeShape {
  std::int64_t len, heads, dim;  // x [len, heads, dim], len = frames · height · width
  std::int64_t t_pairs;          // rotation pairs driven by the frame index
  std::int64_t hw_pairs;         // by the row index, and as many by the column index
};
// Wan's axis split (wan.md §B.7): t gets d - 4·(d/6) real dims, h and w 2·(d/6) each.
RopeShape check_rope_3d(const Tensor& x, const RopeGrid& grid);

// A [C] or [R,C] per-row parameter (modulate's scale and shift, gated_add's gate): true when it
// has one row per row of the input.
bool check_row_param(const Tensor& p, std::int64_t rows, std::int64_t cols, const char* op,
                     const char* name);

struct RopeHalvesShape {
  // x [len, heads, dim]; cos and sin [len, half], half ≤ dim / 2: dims [0, 2·half) rotate.
  std::int64_t len, heads, dim, half;
};
RopeHalvesShape check_rope_halves(const Tensor& x, const Tensor& cos, const Tensor& sin);

// Elements of `shape` before `dim` (outer) and after it (inner).
std::pair<std::int64_t, std::int64_t> split_at(const Shape& shape, int dim);

}  // namespace ferry
