// conv3d's im2col: a block of output positions of one output frame unrolled into an f32 column
// matrix [K, n] (K = Ci·kt·kh·kw, zero padding written as zeros) in the workspace, which a GEMM
// then multiplies by the weight [Co, K]. Same unrolling order as the CPU backend.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor/dtype.h"

namespace ferry::cuda {

struct Im2col {
  const void* x = nullptr;
  DType x_dtype = DType::kF32;
  std::int64_t ci = 0, t = 0, h = 0, w = 0;
  std::int64_t kt = 1, kh = 1, kw = 1;
  std::int64_t stride_t = 1, stride_h = 1, stride_w = 1;
  std::int64_t pad_front = 0, pad_top = 0, pad_left = 0;
  std::int64_t wo = 0;  // output width
  std::int64_t ot = 0;  // the output frame
  std::int64_t p0 = 0;  // first output position (oy·wo + ox) of the block
  std::int64_t n = 0;   // positions in the block
  float* cols = nullptr;
};

void launch_im2col(const Im2col& g, cudaStream_t stream);

}  // namespace ferry::cuda
