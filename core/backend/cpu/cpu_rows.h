// Internal helpers of the CPU backend: rows widened to f32 and rounded back, per-thread scratch,
// argument checks. Not part of any interface.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/op_shapes.h"
#include "core/tensor/convert.h"
#include "core/tensor/tensor.h"

namespace ferry::cpu::detail {

// ---- rows in and out of f32 ----

inline std::byte* element_ptr(const Tensor& t, std::int64_t index) {
  return static_cast<std::byte*>(t.data) + static_cast<std::size_t>(index) * dtype_size(t.dtype);
}

inline void load(const Tensor& t, std::int64_t offset, std::int64_t n, float* dst) {
  convert_to_f32(t.dtype, element_ptr(t, offset), dst, static_cast<std::size_t>(n));
}

inline void store(const float* src, const Tensor& t, std::int64_t offset, std::int64_t n) {
  convert_from_f32(src, t.dtype, element_ptr(t, offset), static_cast<std::size_t>(n));
}

// Rows every thread's buffers hold from the start (64 KiB each): the ThreadPool's workers take
// them when they start (reserve_row_buffers), so which thread happens to run a chunk first does
// not decide whether a later step allocates. Wider rows grow a buffer once, on the thread that
// first meets them.
inline constexpr std::size_t kReservedRowFloats = std::size_t{1} << 14;

// Per-thread row buffers: sized by the widest row seen, then reused.
inline float* row_buffer(int which, std::size_t n) {
  thread_local std::vector<float> buffers[3];
  std::vector<float>& b = buffers[which];
  if (b.size() < n) b.resize(std::max(n, kReservedRowFloats));
  return b.data();
}

inline void reserve_row_buffers() {
  for (int which = 0; which < 3; ++which) row_buffer(which, kReservedRowFloats);
}

// A backend scratch of at least n floats: reserved at kReservedRowFloats on first use, grown
// when an op first needs more (an op that first runs in a later step, as the VAE's temporal
// upsampling does from the second chunk on, then finds room for small shapes).
inline float* grow(std::vector<float>& v, std::size_t n) {
  if (v.size() < n) v.resize(std::max(n, kReservedRowFloats));
  return v.data();
}

// Rows per task: enough work per task to amortise the hand-off.
inline std::size_t grain_for(std::int64_t cols) {
  return static_cast<std::size_t>(std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(cols, 1)));
}

inline void require_cpu(const Tensor& t, const char* op, const char* name) {
  require(t.device == Device::kCpu, op, name, " is not in host memory");
}

inline void require_same_shape(const Tensor& a, const Tensor& b, const char* op) {
  require(a.shape == b.shape, op, "shapes ", a.shape, " and ", b.shape, " differ");
}

// A [C] or [R,C] parameter's row r.
inline std::int64_t param_offset(const Tensor& p, std::int64_t rows, std::int64_t cols,
                                 std::int64_t r, const char* op, const char* name) {
  return check_row_param(p, rows, cols, op, name) ? r * cols : 0;
}

// Softmax of one row in place: f32 exponentials around the row's maximum, an f64 sum.
inline void softmax_row(float* v, std::int64_t n) {
  if (n == 0) return;
  const float top = *std::max_element(v, v + n);
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    v[i] = std::exp(v[i] - top);
    sum += v[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (std::int64_t i = 0; i < n; ++i) v[i] *= inv;
}

}  // namespace ferry::cpu::detail
