#include "cuda/convert.cuh"
#include "cuda/launch.cuh"
#include "cuda/linear.cuh"

namespace ferry::cuda {
namespace {

__global__ void epilogue_kernel(Epilogue e) {
  FERRY_GRID_STRIDE(i, e.rows * e.cols) {
    const std::int64_t r = i / e.cols;
    const std::int64_t c = i % e.cols;
    float v = e.acc != nullptr ? e.acc[r * e.acc_ld + c] : 0.0f;
    if (e.bias != nullptr)
      v += load_f32(e.bias, e.bias_dtype, e.bias_offset + (e.bias_per_row ? r : c));
    if (e.accumulate) v += load_f32(e.out, e.out_dtype, r * e.out_ld + c);
    store_f32(e.out, e.out_dtype, r * e.out_ld + c, v);
  }
}

}  // namespace

void launch_epilogue(const Epilogue& e, cudaStream_t stream) {
  const std::int64_t n = e.rows * e.cols;
  if (n <= 0) return;
  epilogue_kernel<<<grid_for(n), kThreads, 0, stream>>>(e);
  check_launch("linear epilogue kernel");
}

}  // namespace ferry::cuda
