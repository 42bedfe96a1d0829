#include "cuda/conv.cuh"
#include "cuda/convert.cuh"
#include "cuda/launch.cuh"

namespace ferry::cuda {
namespace {

// A thread per column entry, positions fastest (coalesced writes).
__global__ void im2col_kernel(Im2col g) {
  const std::int64_t k_total = g.ci * g.kt * g.kh * g.kw;
  FERRY_GRID_STRIDE(idx, k_total * g.n) {
    const std::int64_t i = idx % g.n;
    const std::int64_t k = idx / g.n;
    const std::int64_t dw = k % g.kw;
    const std::int64_t dh = (k / g.kw) % g.kh;
    const std::int64_t dt = (k / (g.kw * g.kh)) % g.kt;
    const std::int64_t c = k / (g.kw * g.kh * g.kt);
    const std::int64_t it = g.ot * g.stride_t + dt - g.pad_front;
    const std::int64_t oy = (g.p0 + i) / g.wo;
    const std::int64_t ox = (g.p0 + i) % g.wo;
    const std::int64_t iy = oy * g.stride_h + dh - g.pad_top;
    const std::int64_t ix = ox * g.stride_w + dw - g.pad_left;
    const bool inside = it >= 0 && it < g.t && iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
    g.cols[idx] = inside ? load_f32(g.x, g.x_dtype, ((c * g.t + it) * g.h + iy) * g.w + ix) : 0.0f;
  }
}

}  // namespace

void launch_im2col(const Im2col& g, cudaStream_t stream) {
  const std::int64_t n = g.ci * g.kt * g.kh * g.kw * g.n;
  if (n <= 0) return;
  im2col_kernel<<<grid_for(n), kThreads, 0, stream>>>(g);
  check_launch("im2col kernel");
}

}  // namespace ferry::cuda
