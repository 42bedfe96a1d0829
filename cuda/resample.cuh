// The VAE's resampling ops on [C, T, H, W] tensors: nearest 2x upsampling and Wan 2.2's
// AvgDown3D / DupUp3D shortcuts (wan.md §C.1, §C.3). A thread per output element.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor/dtype.h"

namespace ferry::cuda {

// x[planes, H, W] → y[planes, 2H, 2W] (planes = C·T).
void launch_upsample_nearest_2x(const void* x, DType xt, void* y, DType yt, std::int64_t planes,
                                std::int64_t h, std::int64_t w, cudaStream_t stream);

// x[ci, t, h, w] → y[co, t/ft, h/fs, w/fs]: the mean of each group of ci·ft·fs²/co expanded
// channels.
void launch_avg_down_3d(const void* x, DType xt, void* y, DType yt, std::int64_t ci, std::int64_t t,
                        std::int64_t h, std::int64_t w, std::int64_t co, int ft, int fs,
                        cudaStream_t stream);

// x[ci, t, h, w] → y[co, t·ft, h·fs, w·fs]: each channel repeated co·ft·fs²/ci times.
void launch_dup_up_3d(const void* x, DType xt, void* y, DType yt, std::int64_t ci, std::int64_t t,
                      std::int64_t h, std::int64_t w, std::int64_t co, int ft, int fs,
                      cudaStream_t stream);

}  // namespace ferry::cuda
