#include <string>

#include "cuda/convert.cuh"
#include "cuda/launch.cuh"
#include "cuda/layout.cuh"

namespace ferry::cuda {
namespace {

// kRank is a template parameter so that every loop over the geometry unrolls and indexes its
// arrays with constants: the geometry stays in kernel parameters and registers. Indexed with a
// run-time rank, the arrays were copied to a 104-byte local-memory frame per thread.
template <typename T, int kRank>
__global__ void permute_kernel(const T* x, T* y, PermuteGeometry g, std::int64_t n) {
  FERRY_GRID_STRIDE(i, n) {
    std::int64_t rest = i;
    std::int64_t offset = 0;
#pragma unroll
    for (int d = kRank - 1; d >= 0; --d) {
      offset += (rest % g.out_shape[d]) * g.in_stride[d];
      rest /= g.out_shape[d];
    }
    y[i] = x[offset];
  }
}

template <typename T>
void permute_as(const void* x, void* y, const PermuteGeometry& g, std::int64_t n,
                cudaStream_t stream) {
  const auto* in = static_cast<const T*>(x);
  auto* out = static_cast<T*>(y);
  static_assert(PermuteGeometry::kMaxRank == 6, "one case per rank below");
  switch (g.rank) {
    case 0:  // a scalar: one element copied
      return permute_kernel<T, 0><<<grid_for(n), kThreads, 0, stream>>>(in, out, g, n);
    case 1:
      return permute_kernel<T, 1><<<grid_for(n), kThreads, 0, stream>>>(in, out, g, n);
    case 2:
      return permute_kernel<T, 2><<<grid_for(n), kThreads, 0, stream>>>(in, out, g, n);
    case 3:
      return permute_kernel<T, 3><<<grid_for(n), kThreads, 0, stream>>>(in, out, g, n);
    case 4:
      return permute_kernel<T, 4><<<grid_for(n), kThreads, 0, stream>>>(in, out, g, n);
    case 5:
      return permute_kernel<T, 5><<<grid_for(n), kThreads, 0, stream>>>(in, out, g, n);
    case PermuteGeometry::kMaxRank:
      return permute_kernel<T, PermuteGeometry::kMaxRank>
          <<<grid_for(n), kThreads, 0, stream>>>(in, out, g, n);
    default:
      throw Error(ErrorCode::kInternal, "permute: rank " + std::to_string(g.rank));
  }
}

template <typename T>
__global__ void copy_rows_kernel(T* dst, std::int64_t dst_pitch, const T* src,
                                 std::int64_t src_pitch, std::int64_t row_units, std::int64_t n) {
  FERRY_GRID_STRIDE(i, n) {
    const std::int64_t r = i / row_units;
    const std::int64_t c = i % row_units;
    dst[r * dst_pitch + c] = src[r * src_pitch + c];
  }
}

template <typename T>
void copy_rows_as(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                  std::size_t row_bytes, std::int64_t rows, cudaStream_t stream) {
  const auto units = static_cast<std::int64_t>(row_bytes / sizeof(T));
  const std::int64_t n = units * rows;
  copy_rows_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
      static_cast<T*>(dst), static_cast<std::int64_t>(dst_pitch / sizeof(T)),
      static_cast<const T*>(src), static_cast<std::int64_t>(src_pitch / sizeof(T)), units, n);
  check_launch("copy_rows kernel");
}

__device__ __forceinline__ std::int64_t id_at(const void* ids, bool ids_64, std::int64_t i) {
  return ids_64 ? static_cast<const std::int64_t*>(ids)[i]
                : static_cast<std::int64_t>(static_cast<const std::int32_t*>(ids)[i]);
}

__global__ void embedding_check_kernel(const void* ids, bool ids_64, std::int64_t n,
                                       std::int64_t table_rows, unsigned long long* first_bad) {
  FERRY_GRID_STRIDE(i, n) {
    const std::int64_t id = id_at(ids, ids_64, i);
    if (id < 0 || id >= table_rows) atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
}

__global__ void embedding_gather_kernel(const void* table, DType tt, std::int64_t table_rows,
                                        const void* ids, bool ids_64, std::int64_t n,
                                        std::int64_t dim, void* y, DType yt) {
  FERRY_GRID_STRIDE(i, n * dim) {
    const std::int64_t l = i / dim;
    const std::int64_t id = id_at(ids, ids_64, l);
    if (id >= 0 && id < table_rows) store_f32(y, yt, i, load_f32(table, tt, id * dim + i % dim));
  }
}

}  // namespace

void launch_permute(const void* x, void* y, std::size_t element_size, const PermuteGeometry& g,
                    std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  switch (element_size) {
    case 1:
      permute_as<std::uint8_t>(x, y, g, n, stream);
      break;
    case 2:
      permute_as<std::uint16_t>(x, y, g, n, stream);
      break;
    case 4:
      permute_as<std::uint32_t>(x, y, g, n, stream);
      break;
    case 8:
      permute_as<std::uint64_t>(x, y, g, n, stream);
      break;
    default:
      throw Error(ErrorCode::kInternal, "permute: element size " + std::to_string(element_size));
  }
  check_launch("permute kernel");
}

void launch_copy_rows(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                      std::size_t row_bytes, std::int64_t rows, cudaStream_t stream) {
  if (rows <= 0 || row_bytes == 0) return;
  // The widest unit that divides every address and length involved.
  const std::uintptr_t all = reinterpret_cast<std::uintptr_t>(dst) |
                             reinterpret_cast<std::uintptr_t>(src) | dst_pitch | src_pitch |
                             row_bytes;
  if (all % 16 == 0)
    return copy_rows_as<uint4>(dst, dst_pitch, src, src_pitch, row_bytes, rows, stream);
  if (all % 8 == 0)
    return copy_rows_as<std::uint64_t>(dst, dst_pitch, src, src_pitch, row_bytes, rows, stream);
  if (all % 4 == 0)
    return copy_rows_as<std::uint32_t>(dst, dst_pitch, src, src_pitch, row_bytes, rows, stream);
  if (all % 2 == 0)
    return copy_rows_as<std::uint16_t>(dst, dst_pitch, src, src_pitch, row_bytes, rows, stream);
  copy_rows_as<std::uint8_t>(dst, dst_pitch, src, src_pitch, row_bytes, rows, stream);
}

void launch_embedding_check(const void* ids, bool ids_64, std::int64_t n, std::int64_t table_rows,
                            unsigned long long* first_bad, cudaStream_t stream) {
  if (n <= 0) return;
  embedding_check_kernel<<<grid_for(n), kThreads, 0, stream>>>(ids, ids_64, n, table_rows,
                                                               first_bad);
  check_launch("embedding check kernel");
}

void launch_embedding_gather(const void* table, DType tt, std::int64_t table_rows, const void* ids,
                             bool ids_64, std::int64_t n, std::int64_t dim, void* y, DType yt,
                             cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return;
  embedding_gather_kernel<<<grid_for(n * dim), kThreads, 0, stream>>>(table, tt, table_rows, ids,
                                                                      ids_64, n, dim, y, yt);
  check_launch("embedding gather kernel");
}

}  // namespace ferry::cuda
