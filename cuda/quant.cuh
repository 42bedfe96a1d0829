// Dequantisation of block-quantised weights on the device: ggml's blocks (Q4_0 … Q6_K) and
// bitsandbytes 4-bit codes (NF4 / FP4, plain or nested scales), value by value in f32 with the
// association of formats_lora_moe.md §1.2 / §2.4, bit-equal to core/backend/cpu/quant_blocks.h.
// linear uses it to fill the bf16 (or f32) weight panels that feed cuBLASLt; embedding to gather
// rows of a quantised table. The weight itself stays compressed in device memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor/dtype.h"
#include "cuda/quant_decode.cuh"

namespace ferry::cuda {

// Whether the kernels here decode this dtype: the ggml block types and kBnb4.
inline bool device_dequantizable(DType t) {
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kBnb4:
      return true;
    default:
      return false;
  }
}

// out[i] = value first + i of the row-major weight, i < count, rounded to out_t (F32: exact;
// BF16, F16: to nearest even, convert.h's codecs). For a ggml type `first` is a whole number of
// blocks (a panel of whole rows); bnb4 takes any first.
void launch_dequantize(const QuantWeight& w, std::int64_t first, std::int64_t count, void* out,
                       DType out_t, cudaStream_t stream);

// y[l, c] = value ids[l]·dim + c of the weight (a table [rows, dim], rows whole blocks), rounded to
// yt, for l < n; rows whose id is outside [0, table_rows) are left alone (embedding checks the ids
// first).
void launch_dequantize_rows(const QuantWeight& w, std::int64_t table_rows, std::int64_t dim,
                            const void* ids, bool ids_64, std::int64_t n, void* y, DType yt,
                            cudaStream_t stream);

}  // namespace ferry::cuda
