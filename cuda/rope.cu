#include "cuda/convert.cuh"
#include "cuda/launch.cuh"
#include "cuda/rope.cuh"

namespace ferry::cuda {
namespace {

// One axis: (cos, sin) of position p times θ_j = 10000^(-2j / width) at [(p·pairs + j)·2].
__global__ void rope_table_kernel(double* table, std::int64_t positions, std::int64_t pairs) {
  FERRY_GRID_STRIDE(i, positions * pairs) {
    const std::int64_t p = i / pairs;
    const std::int64_t j = i % pairs;
    const double width = static_cast<double>(2 * pairs);
    const double theta = 1.0 / pow(10000.0, static_cast<double>(2 * j) / width);
    const double angle = static_cast<double>(p) * theta;
    table[2 * i] = cos(angle);
    table[2 * i + 1] = sin(angle);
  }
}

// A thread per (token, pair), looping over heads.
__global__ void rope_apply_kernel(void* x, DType xt, std::int64_t heads, std::int64_t dim,
                                  RopeAxes a, const double* tf, const double* th,
                                  const double* tw) {
  const std::int64_t pairs = dim / 2;
  FERRY_GRID_STRIDE(i, a.len * pairs) {
    const std::int64_t n = i / pairs;  // x's row
    const std::int64_t p = i % pairs;
    const std::int64_t token = a.first + n;
    const std::int64_t f = token / (a.height * a.width);
    const std::int64_t y = (token / a.width) % a.height;
    const std::int64_t xw = token % a.width;
    const double* cs = p < a.t_pairs ? tf + (f * a.t_pairs + p) * 2
                       : p < a.t_pairs + a.hw_pairs
                           ? th + (y * a.hw_pairs + p - a.t_pairs) * 2
                           : tw + (xw * a.hw_pairs + p - a.t_pairs - a.hw_pairs) * 2;
    const double c0 = cs[0];
    const double s0 = cs[1];
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t e = (n * heads + h) * dim + 2 * p;
      const double re = load_f32(x, xt, e);
      const double im = load_f32(x, xt, e + 1);
      store_f32(x, xt, e, static_cast<float>(re * c0 - im * s0));
      store_f32(x, xt, e + 1, static_cast<float>(re * s0 + im * c0));
    }
  }
}

// A thread per (token, pair), looping over heads; dims from 2·half on are left as they are.
__global__ void rope_halves_kernel(void* x, DType xt, const void* cos, DType ct, const void* sin,
                                   DType st, std::int64_t len, std::int64_t heads, std::int64_t dim,
                                   std::int64_t half) {
  FERRY_GRID_STRIDE(i, len * half) {
    const std::int64_t n = i / half;
    const std::int64_t j = i % half;
    const float c = load_f32(cos, ct, i);
    const float s = load_f32(sin, st, i);
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t e = (n * heads + h) * dim + j;
      const float a = load_f32(x, xt, e);
      const float b = load_f32(x, xt, e + half);
      store_f32(x, xt, e, __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
      store_f32(x, xt, e + half, __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
    }
  }
}

}  // namespace

void launch_rope_halves(void* x, DType xt, const void* cos, DType ct, const void* sin, DType st,
                        std::int64_t len, std::int64_t heads, std::int64_t dim, std::int64_t half,
                        cudaStream_t stream) {
  const std::int64_t n = len * half;
  if (n <= 0 || heads <= 0) return;
  rope_halves_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, xt, cos, ct, sin, st, len, heads, dim,
                                                           half);
  check_launch("rope_halves kernel");
}

std::int64_t rope_table_doubles(const RopeAxes& a) {
  return 2 * (a.frames * a.t_pairs + (a.height + a.width) * a.hw_pairs);
}

void launch_rope_3d(void* x, DType xt, std::int64_t heads, std::int64_t dim, const RopeAxes& a,
                    double* table, cudaStream_t stream) {
  double* tf = table;
  double* th = tf + 2 * a.frames * a.t_pairs;
  double* tw = th + 2 * a.height * a.hw_pairs;
  const struct {
    double* t;
    std::int64_t positions, pairs;
  } axes[] = {{tf, a.frames, a.t_pairs}, {th, a.height, a.hw_pairs}, {tw, a.width, a.hw_pairs}};
  for (const auto& axis : axes) {
    const std::int64_t n = axis.positions * axis.pairs;
    if (n <= 0) continue;
    rope_table_kernel<<<grid_for(n), kThreads, 0, stream>>>(axis.t, axis.positions, axis.pairs);
    check_launch("rope table kernel");
  }
  const std::int64_t n = a.len * (dim / 2);
  if (n <= 0 || heads <= 0) return;
  rope_apply_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, xt, heads, dim, a, tf, th, tw);
  check_launch("rope kernel");
}

}  // namespace ferry::cuda
