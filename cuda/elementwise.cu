#include "cuda/convert.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/launch.cuh"

namespace ferry::cuda {
namespace {

__global__ void binary_kernel(BinaryOp op, const void* a, DType at, const void* b, DType bt,
                              void* out, DType ot, std::int64_t n) {
  FERRY_GRID_STRIDE(i, n) {
    const float x = load_f32(a, at, i);
    const float y = load_f32(b, bt, i);
    store_f32(out, ot, i, op == BinaryOp::kAdd ? x + y : x * y);
  }
}

__device__ __forceinline__ float gelu_tanh(float u) {
  constexpr float kAlpha = 0.7978845608028654f;  // √(2/π)
  return 0.5f * u * (1.0f + tanhf(kAlpha * (u + 0.044715f * u * u * u)));
}

__device__ __forceinline__ float gelu_erf(float u) {
  constexpr float kSqrtHalf = 0.7071067811865476f;  // 1/√2
  return 0.5f * u * (1.0f + erff(u * kSqrtHalf));
}

__device__ __forceinline__ float silu(float v) {
  return v / (1.0f + expf(-v));
}

__device__ __forceinline__ float unary(UnaryOp op, float v, float a, float b) {
  switch (op) {
    case UnaryOp::kGeluTanh:
      return gelu_tanh(v);
    case UnaryOp::kGeluErf:
      return gelu_erf(v);
    case UnaryOp::kSilu:
      return silu(v);
    case UnaryOp::kClamp:
      return fminf(fmaxf(v, a), b);
    case UnaryOp::kTanhClamp:
      return tanhf(v / a) * a;
  }
  return v;
}

__global__ void unary_kernel(UnaryOp op, const void* x, DType xt, void* y, DType yt,
                             std::int64_t n, float a, float b) {
  FERRY_GRID_STRIDE(i, n) { store_f32(y, yt, i, unary(op, load_f32(x, xt, i), a, b)); }
}

__device__ __forceinline__ float param(const RowParam& p, std::int64_t i, std::int64_t cols) {
  return load_f32(p.data, p.dtype, p.per_row ? i : i % cols);
}

__global__ void modulate_kernel(const void* x, DType xt, RowParam scale, RowParam shift, void* y,
                                DType yt, std::int64_t n, std::int64_t cols) {
  FERRY_GRID_STRIDE(i, n) {
    const float v = load_f32(x, xt, i);
    store_f32(y, yt, i, v * (1.0f + param(scale, i, cols)) + param(shift, i, cols));
  }
}

__global__ void gated_add_kernel(void* x, DType xt, const void* y, DType yt, RowParam gate,
                                 float alpha, std::int64_t n, std::int64_t cols) {
  FERRY_GRID_STRIDE(i, n) {
    const float acc = load_f32(x, xt, i);
    const float add = load_f32(y, yt, i);
    // alpha is 1 for gated_add (1 · add is add exactly) and a LoRA's strength for add_scaled.
    store_f32(x, xt, i, gate.data != nullptr ? acc + add * param(gate, i, cols) : acc + alpha * add);
  }
}

}  // namespace

void launch_binary(BinaryOp op, const void* a, DType at, const void* b, DType bt, void* out,
                   DType ot, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  binary_kernel<<<grid_for(n), kThreads, 0, stream>>>(op, a, at, b, bt, out, ot, n);
  check_launch("add/mul kernel");
}

void launch_unary(UnaryOp op, const void* x, DType xt, void* y, DType yt, std::int64_t n,
                  cudaStream_t stream, float a, float b) {
  if (n <= 0) return;
  unary_kernel<<<grid_for(n), kThreads, 0, stream>>>(op, x, xt, y, yt, n, a, b);
  check_launch("unary kernel");
}

void launch_modulate(const void* x, DType xt, RowParam scale, RowParam shift, void* y, DType yt,
                     std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  const std::int64_t n = rows * cols;
  if (n <= 0) return;
  modulate_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, xt, scale, shift, y, yt, n, cols);
  check_launch("modulate kernel");
}

void launch_gated_add(void* x, DType xt, const void* y, DType yt, RowParam gate, std::int64_t rows,
                      std::int64_t cols, cudaStream_t stream, float alpha) {
  const std::int64_t n = rows * cols;
  if (n <= 0) return;
  gated_add_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, xt, y, yt, gate, alpha, n, cols);
  check_launch("gated_add kernel");
}

}  // namespace ferry::cuda
