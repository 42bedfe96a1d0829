// One thread block per group of g values of a row: the group's q · s is loaded into shared memory,
// transformed there by log4(g) passes of h4 butterflies (core/backend/convrot_butterfly.h, the
// very butterfly the CPU's rotate_convrot_groups applies), scaled by 1/√g and stored rounded.
#include <cmath>

#include "core/backend/convrot_butterfly.h"
#include "cuda/convert.cuh"
#include "cuda/convrot.cuh"
#include "cuda/launch.cuh"

namespace ferry::cuda {
namespace {

__global__ void dequantize_convrot_kernel(const std::int8_t* q, const float* row_scale,
                                          std::int64_t in, std::int64_t group_size,
                                          std::int64_t first_row, void* out, DType out_t,
                                          float norm) {
  extern __shared__ float group[];
  const std::int64_t groups_per_row = in / group_size;
  const std::int64_t row = blockIdx.x / groups_per_row;  // within the panel
  const std::int64_t col0 = (blockIdx.x % groups_per_row) * group_size;
  const std::int64_t source_row = first_row + row;
  const float scale = row_scale[source_row];
  const std::int8_t* codes = q + source_row * in + col0;
  for (std::int64_t i = threadIdx.x; i < group_size; i += blockDim.x) {
    group[i] = __fmul_rn(static_cast<float>(codes[i]), scale);
  }
  __syncthreads();
  const std::int64_t butterflies = group_size / 4;
  for (std::int64_t stride = 1; stride < group_size; stride *= 4) {
    for (std::int64_t b = threadIdx.x; b < butterflies; b += blockDim.x) {
      // Butterfly b: the four values whose index differs only in this pass's base-4 digit.
      const std::int64_t base = (b / stride) * 4 * stride + b % stride;
      h4_butterfly(group + base, stride);
    }
    __syncthreads();
  }
  for (std::int64_t i = threadIdx.x; i < group_size; i += blockDim.x) {
    store_f32(out, out_t, row * in + col0 + i, group[i] * norm);
  }
}

}  // namespace

void launch_dequantize_convrot(const std::int8_t* q, const float* row_scale, std::int64_t in,
                               std::int64_t group_size, std::int64_t first_row, std::int64_t rows,
                               void* out, DType out_t, cudaStream_t stream) {
  if (rows <= 0 || in <= 0) return;
  const std::int64_t blocks = rows * (in / group_size);
  const int threads = static_cast<int>(group_size / 4 < kThreads ? group_size / 4 : kThreads);
  const float norm = 1.0f / std::sqrt(static_cast<float>(group_size));
  dequantize_convrot_kernel<<<static_cast<unsigned>(blocks), threads,
                              static_cast<std::size_t>(group_size) * sizeof(float), stream>>>(
      q, row_scale, in, group_size, first_row, out, out_t, norm);
  check_launch("dequantize convrot kernel");
}

}  // namespace ferry::cuda
