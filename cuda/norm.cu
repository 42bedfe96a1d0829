#include "cuda/convert.cuh"
#include "cuda/launch.cuh"
#include "cuda/norm.cuh"

namespace ferry::cuda {
namespace {

// Row kernels: grid-stride over rows, one block per row at a time. Each element is read by the
// same thread in every pass, so an output aliasing the input is safe.

__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const void* x, DType xt, const void* w, DType wt, float eps, void* y, DType yt,
                    std::int64_t rows, std::int64_t cols) {
  __shared__ double scratch[kThreads / 32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t base = r * cols;
    double sum = 0;
    for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      const double v = load_f32(x, xt, base + i);
      sum += v * v;
    }
    sum = block_sum(sum, scratch);
    const float inv = static_cast<float>(1.0 / sqrt(sum / static_cast<double>(cols) + eps));
    for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      const float v = load_f32(x, xt, base + i);
      store_f32(y, yt, base + i, round_as(xt, v * inv) * load_f32(w, wt, i));
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    layer_norm_kernel(const void* x, DType xt, const void* w, DType wt, const void* b, DType bt,
                      float eps, void* y, DType yt, std::int64_t rows, std::int64_t cols) {
  __shared__ double scratch[kThreads / 32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t base = r * cols;
    double sum = 0;
    for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) sum += load_f32(x, xt, base + i);
    const double mean = block_sum(sum, scratch) / static_cast<double>(cols);
    double var = 0;
    for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      const double d = load_f32(x, xt, base + i) - mean;
      var += d * d;
    }
    var = block_sum(var, scratch) / static_cast<double>(cols);
    const double inv = 1.0 / sqrt(var + eps);
    for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      float n = static_cast<float>((load_f32(x, xt, base + i) - mean) * inv);
      if (w != nullptr) n *= load_f32(w, wt, i);
      if (b != nullptr) n += load_f32(b, bt, i);
      store_f32(y, yt, base + i, n);
    }
  }
}

// A thread per position s: the channel loop reads x[c, s] with consecutive s across the warp.
__global__ void channel_rms_norm_kernel(const void* x, DType xt, const void* g, DType gt,
                                        float root_c, void* y, DType yt, std::int64_t channels,
                                        std::int64_t positions) {
  FERRY_GRID_STRIDE(s, positions) {
    double sum = 0;
    for (std::int64_t c = 0; c < channels; ++c) {
      const double v = load_f32(x, xt, c * positions + s);
      sum += v * v;
    }
    const float norm = fmaxf(static_cast<float>(sqrt(sum)), 1e-12f);
    for (std::int64_t c = 0; c < channels; ++c) {
      const float v = load_f32(x, xt, c * positions + s);
      store_f32(y, yt, c * positions + s, v / norm * root_c * load_f32(g, gt, c));
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    softmax_kernel(const void* x, DType xt, void* y, DType yt, std::int64_t rows,
                   std::int64_t cols) {
  __shared__ float max_scratch[kThreads / 32];
  __shared__ double sum_scratch[kThreads / 32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t base = r * cols;
    float top = -INFINITY;
    for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      top = fmaxf(top, load_f32(x, xt, base + i));
    }
    top = block_max(top, max_scratch);
    double sum = 0;
    for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      sum += expf(load_f32(x, xt, base + i) - top);
    }
    const float inv = static_cast<float>(1.0 / block_sum(sum, sum_scratch));
    for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      store_f32(y, yt, base + i, expf(load_f32(x, xt, base + i) - top) * inv);
    }
  }
}

unsigned row_grid(std::int64_t rows) {
  constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;
  return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

}  // namespace

void launch_rms_norm(const void* x, DType xt, const void* weight, DType wt, float eps, void* y,
                     DType yt, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  rms_norm_kernel<<<row_grid(rows), kThreads, 0, stream>>>(x, xt, weight, wt, eps, y, yt, rows,
                                                           cols);
  check_launch("rms_norm kernel");
}

void launch_layer_norm(const void* x, DType xt, const void* weight, DType wt, const void* bias,
                       DType bt, float eps, void* y, DType yt, std::int64_t rows, std::int64_t cols,
                       cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  layer_norm_kernel<<<row_grid(rows), kThreads, 0, stream>>>(x, xt, weight, wt, bias, bt, eps, y,
                                                             yt, rows, cols);
  check_launch("layer_norm kernel");
}

void launch_channel_rms_norm(const void* x, DType xt, const void* gamma, DType gt, float root_c,
                             void* y, DType yt, std::int64_t channels, std::int64_t positions,
                             cudaStream_t stream) {
  if (channels <= 0 || positions <= 0) return;
  channel_rms_norm_kernel<<<grid_for(positions), kThreads, 0, stream>>>(x, xt, gamma, gt, root_c, y,
                                                                        yt, channels, positions);
  check_launch("channel_rms_norm kernel");
}

void launch_softmax(const void* x, DType xt, void* y, DType yt, std::int64_t rows,
                    std::int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  softmax_kernel<<<row_grid(rows), kThreads, 0, stream>>>(x, xt, y, yt, rows, cols);
  check_launch("softmax kernel");
}

}  // namespace ferry::cuda
