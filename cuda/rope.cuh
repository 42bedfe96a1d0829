// Wan's 3-D RoPE (wan.md §B.7): cos/sin tables per axis built on the device in f64 (the CPU
// backend's expressions), then the interleaved pairs of x[L,H,D] rotated in f64 and rounded once.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor/dtype.h"

namespace ferry::cuda {

struct RopeAxes {
  std::int64_t frames = 1, height = 1, width = 1;
  std::int64_t t_pairs = 0, hw_pairs = 0;  // pairs given to time and to each spatial axis
  std::int64_t first = 0, len = 0;         // x holds tokens first … first + len - 1
};

// Doubles of workspace the tables take: 2 per (position, pair) of each axis.
std::int64_t rope_table_doubles(const RopeAxes& axes);

// Fills `table` (rope_table_doubles(axes) doubles of device memory) and rotates x in place.
void launch_rope_3d(void* x, DType xt, std::int64_t heads, std::int64_t dim, const RopeAxes& axes,
                    double* table, cudaStream_t stream);

// Qwen's rotation by halves (Backend::rope_halves): x[len, heads, dim] in place, the pair
// (j, j + half) of every head turned by cos[l, j], sin[l, j] ([len, half], half ≤ dim/2, any float
// dtype; dims from 2·half on untouched: H3's partial rotation); f32 products rounded as the CPU
// backend rounds them (no fused multiply-add), then once to x's dtype.
void launch_rope_halves(void* x, DType xt, const void* cos, DType ct, const void* sin, DType st,
                        std::int64_t len, std::int64_t heads, std::int64_t dim, std::int64_t half,
                        cudaStream_t stream);

}  // namespace ferry::cuda
