// The kernels around the GEMMs of linear and conv3d: the bias epilogue (the f32 result plus the
// bias, rounded once to the output dtype) and the bias preload (the bias written into the output
// block so that the GEMM adds its product with beta = 1 and rounds once). The conversions of the
// operands into the GEMM's input type are launch_convert (convert.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor/dtype.h"

namespace ferry::cuda {

// out[r·out_ld + c] = round(acc[r·acc_ld + c] + bias (+ out's old value when accumulate)) for a
// rows × cols block. acc == nullptr:
// the bias alone (0 without one). bias is indexed bias_offset + c (per column: a linear's output
// features) or bias_offset + r (per row: a convolution's output channels).
struct Epilogue {
  const float* acc = nullptr;
  std::int64_t acc_ld = 0;
  std::int64_t rows = 0, cols = 0;
  void* out = nullptr;  // the block's first element
  DType out_dtype = DType::kF32;
  std::int64_t out_ld = 0;
  const void* bias = nullptr;
  DType bias_dtype = DType::kF32;
  std::int64_t bias_offset = 0;
  bool bias_per_row = false;
  bool accumulate = false;  // out's old value is added too (linear_add)
};

void launch_epilogue(const Epilogue& e, cudaStream_t stream);

}  // namespace ferry::cuda
