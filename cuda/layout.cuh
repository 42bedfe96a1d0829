// Data movement: permute (rank ≤ 6), row-block copies for concat and slice, and the embedding
// gather with its id check. Copies move bytes (no conversion), as the CPU backend's do.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor/dtype.h"

namespace ferry::cuda {

struct PermuteGeometry {
  static constexpr int kMaxRank = 6;
  int rank = 0;
  std::int64_t out_shape[kMaxRank] = {};
  // Input stride (in elements) of the input dimension that output dimension i comes from.
  std::int64_t in_stride[kMaxRank] = {};
};

void launch_permute(const void* x, void* y, std::size_t element_size, const PermuteGeometry& g,
                    std::int64_t n, cudaStream_t stream);

// rows blocks of row_bytes bytes: dst + r·dst_pitch ← src + r·src_pitch.
void launch_copy_rows(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                      std::size_t row_bytes, std::int64_t rows, cudaStream_t stream);

// Writes into *first_bad (an unsigned long long in device memory, preset to all ones by the
// caller) the smallest index whose id is outside [0, table_rows).
void launch_embedding_check(const void* ids, bool ids_64, std::int64_t n, std::int64_t table_rows,
                            unsigned long long* first_bad, cudaStream_t stream);

// y[l, :] = table[ids[l], :], converted to y's dtype; rows with a bad id are left alone.
void launch_embedding_gather(const void* table, DType tt, std::int64_t table_rows, const void* ids,
                             bool ids_64, std::int64_t n, std::int64_t dim, void* y, DType yt,
                             cudaStream_t stream);

}  // namespace ferry::cuda
