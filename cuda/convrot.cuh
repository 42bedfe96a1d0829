// Comfy-Org's int8 ConvRot weights on the device (minimax_h3.md §G.3, ConvRotState in
// core/tensor/quant.h): a panel of whole rows dequantised into the weight panel linear's GEMM
// takes, W = (q · s) · H_g per group of g columns, in f32 and rounded once to the panel's type.
//
// Why the weight and not the activation, as the CPU backend does: the CUDA GEMM takes bf16
// operands where the values allow, and a rotated x would need one more rounding (H·x is not bf16
// even when x is), while a bf16 panel of W is what Comfy's own path multiplies by (it dequantises
// the weight to the model's dtype); a panel is dequantised once per call (panels outer), and the
// transform is O(g·log g) per group, far below the GEMM's cost.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor/dtype.h"

namespace ferry::cuda {

// out[r, c] for rows [first_row, first_row + rows) of the int8 weight q[·, in] with f32 row scales
// (one per row), rounded to out_t (F32, BF16 or F16), row-major [rows, in]. `group_size` is a
// power of 4 that divides `in` (checked by the caller), at most kMaxConvRotGroup.
inline constexpr std::int64_t kMaxConvRotGroup = 4096;
void launch_dequantize_convrot(const std::int8_t* q, const float* row_scale, std::int64_t in,
                               std::int64_t group_size, std::int64_t first_row, std::int64_t rows,
                               void* out, DType out_t, cudaStream_t stream);

}  // namespace ferry::cuda
