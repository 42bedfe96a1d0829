// The CPU backend's attention (query blocks against whole K and V per head, f32 softmax; key/value
// heads shared by groups of query heads; an optional causal mask), Qwen's rotary embedding by
// halves, and Wan's 3-D RoPE (angles in f64, as the reference computes them).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_rows.h"
#include "core/backend/cpu/gemm.h"
#include "core/backend/op_shapes.h"

namespace ferry::cpu {

using namespace detail;

// ---- attention ----

void CpuBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                           const Tensor* relative_bias, bool causal, const Tensor& o) {
  const auto [len, keys, heads, dim, kv_heads] = check_attention(q, k, v, relative_bias, causal, o);
  if (heads == 0) return;
  const std::int64_t group = heads / kv_heads;  // query heads per key/value head

  // Per key/value head: K and V gathered into contiguous f32 [S, D], then each query head of its
  // group in query blocks of kBlock rows, each holding only a [kBlock, S] score block. Causal
  // blocks compute the scores of the keys their last row sees and mask the rest.
  constexpr std::int64_t kBlock = 32;
  float* kh = grow(scratch_a_, static_cast<std::size_t>(keys * dim));
  float* vh = grow(scratch_b_, static_cast<std::size_t>(keys * dim));
  float* rel =
      relative_bias != nullptr ? grow(scratch_c_, static_cast<std::size_t>(32 * heads)) : nullptr;
  if (relative_bias != nullptr) load(*relative_bias, 0, 32 * heads, rel);
  const auto d = static_cast<std::size_t>(dim);
  const auto s = static_cast<std::size_t>(keys);

  for (std::int64_t h = 0; h < heads; ++h) {
    const std::int64_t kv = h / group;
    if (h % group == 0) {
      for (std::int64_t j = 0; j < keys; ++j) {
        load(k, (j * kv_heads + kv) * dim, dim, kh + j * dim);
        load(v, (j * kv_heads + kv) * dim, dim, vh + j * dim);
      }
    }
    const auto blocks = static_cast<std::size_t>((len + kBlock - 1) / kBlock);
    pool_.parallel_for(blocks, 1, [&](std::size_t b, std::size_t e) {
      float* qb = row_buffer(0, static_cast<std::size_t>(kBlock * dim));
      float* scores = row_buffer(1, static_cast<std::size_t>(kBlock * keys));
      float* out = row_buffer(2, static_cast<std::size_t>(kBlock * dim));
      for (std::size_t block = b; block < e; ++block) {
        const std::int64_t i0 = static_cast<std::int64_t>(block) * kBlock;
        const std::int64_t rows = std::min(kBlock, len - i0);
        const std::int64_t seen = causal ? i0 + rows : keys;  // keys any row of the block sees
        for (std::int64_t i = 0; i < rows; ++i) load(q, ((i0 + i) * heads + h) * dim, dim, qb + i * dim);
        const auto mm = static_cast<std::size_t>(rows);
        const auto n = static_cast<std::size_t>(seen);
        gemm_f32(mm, n, d, scale, qb, d, kh, d, true, 0.0f, scores, s, pool_, gemm_);
        for (std::int64_t i = 0; i < rows; ++i) {
          float* row = scores + i * keys;
          if (relative_bias != nullptr) {
            for (std::int64_t j = 0; j < seen; ++j) {
              row[j] += rel[static_cast<std::size_t>(t5_relative_bucket(j - (i0 + i)) * heads + h)];
            }
          }
          if (causal) {
            for (std::int64_t j = i0 + i + 1; j < seen; ++j) row[j] = -INFINITY;
          }
          softmax_row(row, seen);
        }
        gemm_f32(mm, d, n, 1.0f, scores, s, vh, d, false, 0.0f, out, d, pool_, gemm_);
        for (std::int64_t i = 0; i < rows; ++i) store(out + i * dim, o, ((i0 + i) * heads + h) * dim, dim);
      }
    });
  }
}

void CpuBackend::rope_halves(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const auto [len, heads, dim, half] = check_rope_halves(x, cos, sin);
  pool_.parallel_for(
      static_cast<std::size_t>(len), grain_for(heads * dim), [&](std::size_t b, std::size_t e) {
        float* v = row_buffer(0, static_cast<std::size_t>(heads * dim));
        float* c = row_buffer(1, static_cast<std::size_t>(half));
        float* sn = row_buffer(2, static_cast<std::size_t>(half));
        for (auto n = static_cast<std::int64_t>(b); n < static_cast<std::int64_t>(e); ++n) {
          load(x, n * heads * dim, heads * dim, v);
          load(cos, n * half, half, c);
          load(sin, n * half, half, sn);
          for (std::int64_t h = 0; h < heads; ++h) {
            float* head = v + h * dim;
            for (std::int64_t j = 0; j < half; ++j) {
              const float a = head[j];
              const float b2 = head[j + half];
              head[j] = a * c[j] - b2 * sn[j];
              head[j + half] = b2 * c[j] + a * sn[j];
            }
          }
          store(v, x, n * heads * dim, heads * dim);
        }
      });
}

void CpuBackend::rope_3d(const Tensor& x, const RopeGrid& grid) {
  const auto [len, heads, dim, t_pairs, hw_pairs] = check_rope_3d(x, grid);
  const std::int64_t pairs = dim / 2;

  // cos/sin per (position, pair) for each axis, in f64 as the reference computes them, one
  // after the other in the backend's table scratch.
  const auto entries = [](std::int64_t positions, std::int64_t axis_pairs) {
    return static_cast<std::size_t>(positions * axis_pairs * 2);
  };
  const std::size_t f_entries = entries(grid.frames, t_pairs);
  const std::size_t h_entries = entries(grid.height, hw_pairs);
  const std::size_t w_entries = entries(grid.width, hw_pairs);
  if (rope_tables_.size() < f_entries + h_entries + w_entries) {
    rope_tables_.resize(f_entries + h_entries + w_entries);
  }
  const auto table = [](double* t, std::int64_t positions, std::int64_t axis_pairs) {
    const double width = static_cast<double>(2 * axis_pairs);
    for (std::int64_t p = 0; p < positions; ++p) {
      for (std::int64_t j = 0; j < axis_pairs; ++j) {
        const double theta = 1.0 / std::pow(10000.0, static_cast<double>(2 * j) / width);
        const double angle = static_cast<double>(p) * theta;
        t[static_cast<std::size_t>((p * axis_pairs + j) * 2)] = std::cos(angle);
        t[static_cast<std::size_t>((p * axis_pairs + j) * 2 + 1)] = std::sin(angle);
      }
    }
    return t;
  };
  const double* tf = table(rope_tables_.data(), grid.frames, t_pairs);
  const double* th = table(rope_tables_.data() + f_entries, grid.height, hw_pairs);
  const double* tw = table(rope_tables_.data() + f_entries + h_entries, grid.width, hw_pairs);

  pool_.parallel_for(static_cast<std::size_t>(len), grain_for(heads * dim), [&](std::size_t b, std::size_t e) {
    float* v = row_buffer(0, static_cast<std::size_t>(heads * dim));
    for (auto n = static_cast<std::int64_t>(b); n < static_cast<std::int64_t>(e); ++n) {
      const std::int64_t token = grid.first + n;
      const std::int64_t f = token / (grid.height * grid.width);
      const std::int64_t y = (token / grid.width) % grid.height;
      const std::int64_t xw = token % grid.width;
      load(x, n * heads * dim, heads * dim, v);
      for (std::int64_t p = 0; p < pairs; ++p) {
        const double* cs = p < t_pairs ? &tf[static_cast<std::size_t>((f * t_pairs + p) * 2)]
                           : p < t_pairs + hw_pairs
                               ? &th[static_cast<std::size_t>((y * hw_pairs + p - t_pairs) * 2)]
                               : &tw[static_cast<std::size_t>((xw * hw_pairs + p - t_pairs - hw_pairs) * 2)];
        for (std::int64_t h = 0; h < heads; ++h) {
          float* pair = v + h * dim + 2 * p;
          const double a = pair[0];
          const double c = pair[1];
          pair[0] = static_cast<float>(a * cs[0] - c * cs[1]);
          pair[1] = static_cast<float>(a * cs[1] + c * cs[0]);
        }
      }
      store(v, x, n * heads * dim, heads * dim);
    }
  });
}

}  // namespace ferry::cpu
