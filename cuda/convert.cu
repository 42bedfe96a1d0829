#include "cuda/convert.cuh"
#include "cuda/launch.cuh"

namespace ferry::cuda {
namespace {

__global__ void convert_kernel(const void* x, DType xt, void* y, DType yt, DType through,
                               std::int64_t n) {
  FERRY_GRID_STRIDE(i, n) {
    store_f32(y, yt, i, round_as(through, load_f32(x, xt, i)));
  }
}

}  // namespace

void launch_convert(const void* x, DType xt, void* y, DType yt, DType through, std::int64_t n,
                    cudaStream_t stream) {
  if (n <= 0) return;
  convert_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, xt, y, yt, through, n);
  check_launch("convert kernel");
}

}  // namespace ferry::cuda
