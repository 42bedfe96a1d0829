// Row reductions: rms_norm, layer_norm, channel_rms_norm and softmax. One block per row (a
// thread per position for channel_rms_norm); statistics in f64 as the CPU backend keeps them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor/dtype.h"

namespace ferry::cuda {

// y = round_x(x · rsqrt(mean(x²) + eps)) · weight, per row of x[R,C].
void launch_rms_norm(const void* x, DType xt, const void* weight, DType wt, float eps, void* y,
                     DType yt, std::int64_t rows, std::int64_t cols, cudaStream_t stream);

// y = (x - mean) · rsqrt(var + eps) (· weight + bias where given), per row.
void launch_layer_norm(const void* x, DType xt, const void* weight, DType wt, const void* bias,
                       DType bt, float eps, void* y, DType yt, std::int64_t rows, std::int64_t cols,
                       cudaStream_t stream);

// x[C,S]: y = x / max(‖x[:, s]‖₂, 1e-12) · root_c · gamma[c].
void launch_channel_rms_norm(const void* x, DType xt, const void* gamma, DType gt, float root_c,
                             void* y, DType yt, std::int64_t channels, std::int64_t positions,
                             cudaStream_t stream);

// Softmax of each row in f32 (sum in f64); y may alias x.
void launch_softmax(const void* x, DType xt, void* y, DType yt, std::int64_t rows,
                    std::int64_t cols, cudaStream_t stream);

}  // namespace ferry::cuda
