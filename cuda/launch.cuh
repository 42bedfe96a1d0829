// What every kernel file shares: grid sizing for grid-stride loops, the launch check, and the
// block-wide reductions of the row kernels. Included by .cu files only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/cuda_error.h"

namespace ferry::cuda {

inline constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items: enough to fill any GPU, never above the limit.
inline unsigned grid_for(std::int64_t n, int threads = kThreads) {
  const std::int64_t blocks = (n + threads - 1) / threads;
  constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

// Throws the launch error of the kernel just queued (bad configuration, missing image for this
// GPU). Errors of the kernel's execution surface at the next synchronising call.
inline void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) throw cuda_error(kernel, status);
}

#if defined(__CUDACC__)

#define FERRY_GRID_STRIDE(i, n)                                                                    \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  return v;
}

// Block-wide sum for blocks of kThreads threads; every thread gets the total. `scratch` holds
// kThreads / 32 values; the call ends with a barrier, so scratch may be reused right after.
template <typename T>
__device__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) total += scratch[w];
  __syncthreads();
  return total;
}

// Block-wide max (NaN is ignored by fmaxf, as std::max_element ignores it only sometimes; the
// callers' inputs are finite).
__device__ inline float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float top = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) top = fmaxf(top, scratch[w]);
  __syncthreads();
  return top;
}

#endif  // __CUDACC__

}  // namespace ferry::cuda
