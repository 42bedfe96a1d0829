// The dequantisation kernels: one thread per value, which decodes it with quant_decode.cuh (its
// block's scales and its own bits). Memory-bound: a value costs a few integer operations, its
// block's header is shared through L1 by the threads that read it, and the write of the bf16
// panel dominates.
//
// Bit-exactness with the CPU (core/backend/cpu/quant_blocks.cpp, compiled -ffp-contract=off):
// quant_decode.cuh's f32 arithmetic is __fmul_rn / __fadd_rn / __fsub_rn on the device, which
// nvcc never contracts into an FMA (the library is also built with --fmad=false), in exactly the
// reference's association; the f16 scales are decoded by float_codec.h, subnormals included (no
// -ftz).
#include <string>

#include "core/error.h"
#include "cuda/convert.cuh"
#include "cuda/launch.cuh"
#include "cuda/quant.cuh"

namespace ferry::cuda {
namespace {

using quant::BlockSource;
using quant::Bnb4Source;

template <typename Source>
__global__ void dequantize_kernel(Source src, std::int64_t first, std::int64_t count, void* out,
                                  DType out_t) {
  FERRY_GRID_STRIDE(i, count) {
    store_f32(out, out_t, i, src.value(first + i));
  }
}

__device__ __forceinline__ std::int64_t id_at(const void* ids, bool ids_64, std::int64_t l) {
  return ids_64 ? static_cast<const std::int64_t*>(ids)[l]
                : static_cast<const std::int32_t*>(ids)[l];
}

template <typename Source>
__global__ void dequantize_rows_kernel(Source src, std::int64_t table_rows, std::int64_t dim,
                                       const void* ids, bool ids_64, std::int64_t n, void* y,
                                       DType yt) {
  FERRY_GRID_STRIDE(i, n * dim) {
    const std::int64_t id = id_at(ids, ids_64, i / dim);
    if (id >= 0 && id < table_rows) store_f32(y, yt, i, src.value(id * dim + i % dim));
  }
}

// Calls fn with the value source of w's dtype.
template <typename Fn>
void with_source(const QuantWeight& w, Fn&& fn) {
  const auto* data = static_cast<const std::uint8_t*>(w.data);
  switch (w.dtype) {
    case DType::kQ4_0:
      return fn(BlockSource<DType::kQ4_0>{data});
    case DType::kQ4_1:
      return fn(BlockSource<DType::kQ4_1>{data});
    case DType::kQ5_0:
      return fn(BlockSource<DType::kQ5_0>{data});
    case DType::kQ5_1:
      return fn(BlockSource<DType::kQ5_1>{data});
    case DType::kQ8_0:
      return fn(BlockSource<DType::kQ8_0>{data});
    case DType::kQ2_K:
      return fn(BlockSource<DType::kQ2_K>{data});
    case DType::kQ3_K:
      return fn(BlockSource<DType::kQ3_K>{data});
    case DType::kQ4_K:
      return fn(BlockSource<DType::kQ4_K>{data});
    case DType::kQ5_K:
      return fn(BlockSource<DType::kQ5_K>{data});
    case DType::kQ6_K:
      return fn(BlockSource<DType::kQ6_K>{data});
    case DType::kBnb4:
      return fn(Bnb4Source{w});
    default:  // the kernels library does not link the core's dtype_name
      throw Error(ErrorCode::kInternal, "no dequantisation kernel for dtype " +
                                            std::to_string(static_cast<int>(w.dtype)));
  }
}

}  // namespace

void launch_dequantize(const QuantWeight& w, std::int64_t first, std::int64_t count, void* out,
                       DType out_t, cudaStream_t stream) {
  if (count <= 0) return;
  with_source(w, [&](const auto& src) {
    dequantize_kernel<<<grid_for(count), kThreads, 0, stream>>>(src, first, count, out, out_t);
  });
  check_launch("dequantize kernel");
}

void launch_dequantize_rows(const QuantWeight& w, std::int64_t table_rows, std::int64_t dim,
                            const void* ids, bool ids_64, std::int64_t n, void* y, DType yt,
                            cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return;
  with_source(w, [&](const auto& src) {
    dequantize_rows_kernel<<<grid_for(n * dim), kThreads, 0, stream>>>(src, table_rows, dim, ids,
                                                                       ids_64, n, y, yt);
  });
  check_launch("dequantize rows kernel");
}

}  // namespace ferry::cuda
