// The CPU backend's data movement: permute, concat, slice (byte copies, no conversion) and the
// embedding lookup.
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_rows.h"
#include "core/backend/cpu/quant_blocks.h"
#include "core/backend/op_shapes.h"
#include "core/error.h"

namespace ferry::cpu {

using namespace detail;

namespace {

void require_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  require(a.dtype == b.dtype, op, "dtypes ", a.dtype, " and ", b.dtype, " differ");
}

}  // namespace

void CpuBackend::permute(const Tensor& x, const std::vector<int>& order, const Tensor& y) {
  const char* op = "permute";
  const int rank = x.shape.rank();
  require(static_cast<int>(order.size()) == rank && y.shape.rank() == rank, op, "order has the wrong length");
  require_same_dtype(x, y, op);
  // Shapes have at most Shape::kMaxRank dimensions: the bookkeeping lives on the stack.
  std::array<bool, Shape::kMaxRank> seen{};
  std::array<std::int64_t, Shape::kMaxRank> in_stride{};
  std::int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    in_stride[static_cast<std::size_t>(i)] = s;
    s *= x.shape[i];
  }
  for (int i = 0; i < rank; ++i) {
    const int from = order[static_cast<std::size_t>(i)];
    require(from >= 0 && from < rank && !seen[static_cast<std::size_t>(from)], op, "order is not a permutation");
    seen[static_cast<std::size_t>(from)] = true;
    require(y.shape[i] == x.shape[from], op, "y is ", y.shape, " for x ", x.shape);
  }
  if (x.numel() == 0) return;
  const std::size_t size = dtype_size(x.dtype);
  const std::int64_t cols = rank == 0 ? 1 : y.shape[rank - 1];
  const std::int64_t rows = x.numel() / cols;
  const std::int64_t last_stride = rank == 0 ? 1 : in_stride[static_cast<std::size_t>(order.back())];
  const auto* src = static_cast<const std::byte*>(x.data);
  auto* dst = static_cast<std::byte*>(y.data);
  pool_.parallel_for(static_cast<std::size_t>(rows), grain_for(cols), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t r = lo; r < hi; ++r) {
      // The input offset of output row r, from its index in every output dimension but the last.
      std::int64_t rest = static_cast<std::int64_t>(r);
      std::int64_t base = 0;
      for (int i = rank - 2; i >= 0; --i) {
        base += (rest % y.shape[i]) * in_stride[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
        rest /= y.shape[i];
      }
      std::byte* out = dst + static_cast<std::size_t>(r) * static_cast<std::size_t>(cols) * size;
      for (std::int64_t c = 0; c < cols; ++c) {
        std::memcpy(out + static_cast<std::size_t>(c) * size,
                    src + static_cast<std::size_t>(base + c * last_stride) * size, size);
      }
    }
  });
}

void CpuBackend::concat(const Tensor& a, const Tensor& b, int dim, const Tensor& y) {
  const char* op = "concat";
  require(dim >= 0 && dim < a.shape.rank() && a.shape.rank() == b.shape.rank() &&
              a.shape.rank() == y.shape.rank(), op, "dimension out of range");
  require_same_dtype(a, b, op);
  require_same_dtype(a, y, op);
  Shape joined = a.shape;
  joined[dim] = a.shape[dim] + b.shape[dim];
  Shape b_as_a = b.shape;
  b_as_a[dim] = a.shape[dim];
  require(b_as_a == a.shape, op, a.shape, " and ", b.shape, " differ outside dim ", dim);
  require_shape(y, joined, op, "y");
  const auto [outer, inner] = split_at(a.shape, dim);
  const std::size_t size = dtype_size(a.dtype);
  const std::size_t a_chunk = static_cast<std::size_t>(a.shape[dim] * inner) * size;
  const std::size_t b_chunk = static_cast<std::size_t>(b.shape[dim] * inner) * size;
  for (std::int64_t o = 0; o < outer; ++o) {
    std::byte* out = static_cast<std::byte*>(y.data) + static_cast<std::size_t>(o) * (a_chunk + b_chunk);
    std::memcpy(out, static_cast<const std::byte*>(a.data) + static_cast<std::size_t>(o) * a_chunk, a_chunk);
    std::memcpy(out + a_chunk, static_cast<const std::byte*>(b.data) + static_cast<std::size_t>(o) * b_chunk, b_chunk);
  }
}

void CpuBackend::slice(const Tensor& x, int dim, std::int64_t begin, const Tensor& y) {
  const char* op = "slice";
  require(dim >= 0 && dim < x.shape.rank() && y.shape.rank() == x.shape.rank(), op, "dimension out of range");
  require_same_dtype(x, y, op);
  Shape expect = x.shape;
  expect[dim] = y.shape[dim];
  require_shape(y, expect, op, "y");
  require(begin >= 0 && begin + y.shape[dim] <= x.shape[dim], op, "range ", begin, "+",
          y.shape[dim], " of ", x.shape);
  const auto [outer, inner] = split_at(x.shape, dim);
  const std::size_t size = dtype_size(x.dtype);
  const std::size_t in_chunk = static_cast<std::size_t>(x.shape[dim] * inner) * size;
  const std::size_t out_chunk = static_cast<std::size_t>(y.shape[dim] * inner) * size;
  const std::size_t skip = static_cast<std::size_t>(begin * inner) * size;
  for (std::int64_t o = 0; o < outer; ++o) {
    std::memcpy(static_cast<std::byte*>(y.data) + static_cast<std::size_t>(o) * out_chunk,
                static_cast<const std::byte*>(x.data) + static_cast<std::size_t>(o) * in_chunk + skip,
                out_chunk);
  }
}

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, const Tensor& y) {
  const char* op = "embedding";
  require(table.shape.rank() == 2, op, "table must be [rows, dim]");
  require(ids.dtype == DType::kI32 || ids.dtype == DType::kI64, op, "ids must be I32 or I64");
  const std::int64_t dim = table.shape[1];
  require_shape(y, Shape{ids.numel(), dim}, op, "y");
  // A bitsandbytes table would need its quant state, which embedding does not take.
  require(table.dtype != DType::kBnb4, op, "a bitsandbytes 4-bit table");
  for (std::int64_t i = 0; i < ids.numel(); ++i) {
    const std::int64_t id = ids.dtype == DType::kI32 ? ids.as<const std::int32_t>()[i]
                                                     : ids.as<const std::int64_t>()[i];
    if (id < 0 || id >= table.shape[0]) {
      throw Error(ErrorCode::kBadModelFile,
                  "token id " + std::to_string(id) + " is outside the embedding table's " +
                      std::to_string(table.shape[0]) +
                      " rows: the tokenizer does not belong to this text encoder");
    }
    float* row = row_buffer(0, static_cast<std::size_t>(dim));
    if (dtype_is_blocked(table.dtype)) {
      // A quantised table (umT5 GGUF's token_embd): the one row, dequantised; rows are whole
      // blocks, so row `id` starts at a block.
      const auto row_bytes = dtype_storage_bytes(table.dtype, static_cast<std::uint64_t>(dim));
      dequantize(table.dtype,
                 static_cast<const std::byte*>(table.data) + static_cast<std::uint64_t>(id) * row_bytes,
                 row, dim);
    } else {
      load(table, id * dim, dim, row);
    }
    store(row, y, i * dim, dim);
  }
}

}  // namespace ferry::cpu
