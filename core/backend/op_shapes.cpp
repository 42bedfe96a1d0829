#include "core/backend/op_shapes.h"

namespace ferry {

LinearShape check_linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  const char* op = "linear";
  LinearShape s{x.shape.rows(), x.shape.cols(), 0};
  require(w.shape.rank() == 2 && w.shape[1] == s.k, op, "weight ", w.shape,
          " does not match input ", x.shape);
  s.n = w.shape[0];
  require(y.shape.rows() == s.m && y.shape.cols() == s.n, op, "output ", y.shape, " is not [", s.m,
          ", ", s.n, "]");
  require(bias == nullptr || bias->numel() == s.n, op, "bias size differs from the output width");
  require_float(x, op, "x");
  require_float(y, op, "y");
  return s;
}

AttentionShape check_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor* relative_bias, bool causal, const Tensor& o) {
  const char* op = "attention";
  require(q.shape.rank() == 3 && k.shape.rank() == 3 && v.shape.rank() == 3, op,
          "q, k and v must be [tokens, heads, head_dim]");
  const AttentionShape s{q.shape[0], k.shape[0], q.shape[1], q.shape[2], k.shape[1]};
  require(s.kv_heads > 0 ? s.heads % s.kv_heads == 0 : s.heads == 0, op, s.heads,
          " query heads do not share ", s.kv_heads, " key/value heads evenly");
  require_shape(k, Shape{s.keys, s.kv_heads, s.dim}, op, "k");
  require_shape(v, Shape{s.keys, s.kv_heads, s.dim}, op, "v");
  require(!causal || s.len == s.keys, op, "causal attention needs as many queries as keys, not ",
          s.len, " and ", s.keys);
  require_shape(o, Shape{s.len, s.heads, s.dim}, op, "o");
  if (relative_bias != nullptr) {
    require_shape(*relative_bias, Shape{32, s.heads}, op, "relative_bias");
  }
  return s;
}

Conv3dShape check_conv3d(const Tensor& x, const Tensor& w, const Tensor* bias,
                         const Conv3dParams& p, const Tensor& y) {
  const char* op = "conv3d";
  require(x.shape.rank() == 4 && w.shape.rank() == 5 && y.shape.rank() == 4, op,
          "x and y must be [C, T, H, W] and w [Co, Ci, kt, kh, kw]");
  Conv3dShape s{x.shape[0], x.shape[1], x.shape[2], x.shape[3],
                w.shape[0], w.shape[2], w.shape[3], w.shape[4], 0, 0, 0};
  require(w.shape[1] == s.ci, op, "weight ", w.shape, " does not take ", x.shape);
  require(p.stride_t > 0 && p.stride_h > 0 && p.stride_w > 0, op, "strides must be positive");
  require(p.pad_front >= 0 && p.pad_back >= 0 && p.pad_top >= 0 && p.pad_bottom >= 0 &&
              p.pad_left >= 0 && p.pad_right >= 0, op, "padding must not be negative");
  const std::int64_t tp = s.t + p.pad_front + p.pad_back;
  const std::int64_t hp = s.h + p.pad_top + p.pad_bottom;
  const std::int64_t wp = s.w + p.pad_left + p.pad_right;
  require(tp >= s.kt && hp >= s.kh && wp >= s.kw, op, "the kernel is larger than the padded input");
  s.to = (tp - s.kt) / p.stride_t + 1;
  s.ho = (hp - s.kh) / p.stride_h + 1;
  s.wo = (wp - s.kw) / p.stride_w + 1;
  require_shape(y, Shape{s.co, s.to, s.ho, s.wo}, op, "y");
  require(bias == nullptr || bias->numel() == s.co, op, "bias size");
  return s;
}

void check_snake_beta(const Tensor& x, const Tensor& alpha, const Tensor& beta,
                      const Tensor& filters, const Tensor& y) {
  const char* op = "snake_beta_alias_free";
  require(x.shape.rank() == 2 && x.shape[1] > 0, op, "x must be [C, T], not ", x.shape);
  require_shape(y, x.shape, op, "y");
  require_shape(alpha, Shape{x.shape[0]}, op, "alpha");
  require_shape(beta, Shape{x.shape[0]}, op, "beta");
  require_shape(filters, Shape{2, 12}, op, "filters");
  require(alpha.dtype == DType::kF32 && beta.dtype == DType::kF32 && filters.dtype == DType::kF32,
          op, "alpha, beta and filters must be F32");
}

RopeShape check_rope_3d(const Tensor& x, const RopeGrid& grid) {
  const char* op = "rope_3d";
  require(x.shape.rank() == 3, op, "x must be [tokens, heads, head_dim]");
  RopeShape s{x.shape[0], x.shape[1], x.shape[2], 0, 0};
  require(grid.first >= 0 && grid.first + s.len <= grid.frames * grid.height * grid.width, op,
          "tokens ", grid.first, " to ", grid.first + s.len, " of a ", grid.frames, "x",
          grid.height, "x", grid.width, " grid");
  require(s.dim % 2 == 0 && s.dim >= 6, op, "head_dim must be even");
  const std::int64_t hw_real = 2 * (s.dim / 6);
  s.t_pairs = (s.dim - 2 * hw_real) / 2;
  s.hw_pairs = hw_real / 2;
  return s;
}

RopeHalvesShape check_rope_halves(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const char* op = "rope_halves";
  require(x.shape.rank() == 3, op, "x must be [tokens, heads, head_dim]");
  require(cos.shape.rank() == 2, op, "cos must be [tokens, rotated pairs]");
  const RopeHalvesShape s{x.shape[0], x.shape[1], x.shape[2], cos.shape[1]};
  require(s.half >= 1 && 2 * s.half <= s.dim, op, "cos holds ", s.half,
          " angles per token for heads of ", s.dim);
  require_shape(cos, Shape{s.len, s.half}, op, "cos");
  require_shape(sin, Shape{s.len, s.half}, op, "sin");
  require_float(x, op, "x");
  require_float(cos, op, "cos");
  require_float(sin, op, "sin");
  return s;
}

bool check_row_param(const Tensor& p, std::int64_t rows, std::int64_t cols, const char* op,
                     const char* name) {
  require(p.numel() == cols || p.numel() == rows * cols, op, name, " is ", p.shape, ", expected [",
          cols, "] or [", rows, ", ", cols, "]");
  return p.numel() != cols;
}

std::pair<std::int64_t, std::int64_t> split_at(const Shape& shape, int dim) {
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= shape[i];
  for (int i = dim + 1; i < shape.rank(); ++i) inner *= shape[i];
  return {outer, inner};
}

}  // namespace ferry
