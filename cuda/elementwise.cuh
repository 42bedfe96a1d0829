// Elementwise kernels: add, mul, gelu_tanh, gelu_erf, silu, clamp, tanh_clamp, modulate,
// gated_add. Each element is widened to f32, computed with the CPU backend's expression (same
// operation order; the kernels are built with --fmad=false so no multiply-add is fused where the
// CPU does not fuse one), and rounded once.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor/dtype.h"

namespace ferry::cuda {

enum class BinaryOp { kAdd, kMul };
enum class UnaryOp { kGeluTanh, kGeluErf, kSilu, kClamp, kTanhClamp };

// out = a (op) b, n elements; out may alias a or b.
void launch_binary(BinaryOp op, const void* a, DType at, const void* b, DType bt, void* out,
                   DType ot, std::int64_t n, cudaStream_t stream);

// y = f(x), n elements; y may alias x. a and b: kClamp's lo and hi, kTanhClamp's limit (a).
void launch_unary(UnaryOp op, const void* x, DType xt, void* y, DType yt, std::int64_t n,
                  cudaStream_t stream, float a = 0.0f, float b = 0.0f);

// A [C] or [R,C] parameter of a row op: per_row says which.
struct RowParam {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  bool per_row = false;
};

// y[R,C] = x · (1 + scale) + shift.
void launch_modulate(const void* x, DType xt, RowParam scale, RowParam shift, void* y, DType yt,
                     std::int64_t rows, std::int64_t cols, cudaStream_t stream);

// x[R,C] += y · gate (gate.data == nullptr: x += alpha · y).
void launch_gated_add(void* x, DType xt, const void* y, DType yt, RowParam gate, std::int64_t rows,
                      std::int64_t cols, cudaStream_t stream, float alpha = 1.0f);

}  // namespace ferry::cuda
