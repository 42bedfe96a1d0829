// Internal helpers of the CUDA backend's entry points (cuda_backend*.cpp): argument checks, the
// kernels' view of a quantised weight, and the workspace cursor. Not part of any interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/tensor/quant.h"
#include "core/tensor/tensor.h"
#include "cuda/convert.cuh"
#include "cuda/gemm_plan.h"
#include "cuda/quant.cuh"

namespace ferry::cuda::detail {

inline void require_cuda(const Tensor& t, const char* op, const char* name) {
  require(t.device == Device::kCuda, op, std::string(name) + " is not in device memory");
}

// A tensor the kernels read (F32, BF16, F16, F8) / write (the same), on the device.
inline void require_input(const Tensor& t, const char* op, const char* name) {
  require_cuda(t, op, name);
  require(device_loadable(t.dtype), op,
          std::string(name) + " has dtype " + std::string(dtype_name(t.dtype)) +
              ", which the CUDA kernels do not read");
}

inline void require_output(const Tensor& t, const char* op, const char* name) {
  require_cuda(t, op, name);
  require(device_storable(t.dtype), op,
          std::string(name) + " has dtype " + std::string(dtype_name(t.dtype)) +
              ", which the CUDA kernels do not write");
}

inline void require_same_shape(const Tensor& a, const Tensor& b, const char* op) {
  require(a.shape == b.shape, op, "shapes " + a.shape.str() + " and " + b.shape.str() + " differ");
}

// A quantised weight (a ggml block type, or bitsandbytes 4-bit codes with their state) as the
// dequantisation kernels read it, after the checks they cannot make: on the device, rows of whole
// blocks, and for kBnb4 a quant state on the device whose sizes match the weight (the kernels
// index it without bounds). `bnb4` must be given with, and only with, a kBnb4 weight.
inline QuantWeight quant_weight(const Tensor& w, const Bnb4State* bnb4, const char* op,
                                const char* name) {
  require_cuda(w, op, name);
  require(device_dequantizable(w.dtype), op, name, " has dtype ", w.dtype,
          ", which the CUDA kernels do not dequantise");
  const std::int64_t per_block = dtype_block_elems(w.dtype);
  require(w.shape.rank() >= 1 && w.shape.cols() % per_block == 0, op, name, " ", w.shape,
          ": rows must be whole blocks of ", per_block, " ", w.dtype, " values");
  QuantWeight q;
  q.dtype = w.dtype;
  q.data = w.data;
  if (w.dtype != DType::kBnb4) {
    require(bnb4 == nullptr, op, "a bitsandbytes quant state came with ", name, " of dtype ",
            w.dtype);
    return q;
  }
  require(bnb4 != nullptr, op, name,
          " holds bitsandbytes 4-bit codes but no quant state came with it");
  const Bnb4State& s = *bnb4;
  require(s.blocksize > 0, op, "bitsandbytes blocksize ", s.blocksize);
  const std::int64_t blocks = (w.numel() + s.blocksize - 1) / s.blocksize;
  require_cuda(s.absmax, op, "the bitsandbytes absmax");
  require(
      (s.absmax.dtype == DType::kF32 || s.absmax.dtype == DType::kU8) && s.absmax.numel() == blocks,
      op, "the bitsandbytes absmax is ", s.absmax, " for ", blocks, " blocks of ", s.blocksize,
      " (F32 plain, U8 nested)");
  require_cuda(s.code, op, "the bitsandbytes code book");
  require(s.code.dtype == DType::kF32 && s.code.numel() == 16, op, "the bitsandbytes code book is ",
          s.code, ", not F32[16]");
  q.absmax = s.absmax.data;
  q.code = s.code.as<const float>();
  q.blocksize = s.blocksize;
  q.nested = s.nested();
  if (q.nested) {
    require(s.nested_blocksize > 0, op, "bitsandbytes nested blocksize ", s.nested_blocksize);
    const std::int64_t nested_blocks = (blocks + s.nested_blocksize - 1) / s.nested_blocksize;
    require_cuda(s.nested_absmax, op, "the bitsandbytes nested absmax");
    require(s.nested_absmax.dtype == DType::kF32 && s.nested_absmax.numel() == nested_blocks, op,
            "the bitsandbytes nested absmax is ", s.nested_absmax, ", not F32[", nested_blocks,
            "]");
    require_cuda(s.nested_code, op, "the bitsandbytes nested code");
    require(s.nested_code.dtype == DType::kF32 && s.nested_code.numel() == 256, op,
            "the bitsandbytes nested code is ", s.nested_code, ", not F32[256]");
    q.nested_absmax = s.nested_absmax.as<const float>();
    q.nested_code = s.nested_code.as<const float>();
    q.nested_offset = s.nested_offset;
    q.nested_blocksize = s.nested_blocksize;
  }
  return q;
}

// Bytes of element `index` of t.
inline void* element_ptr(const Tensor& t, std::int64_t index) {
  return static_cast<std::byte*>(t.data) + static_cast<std::size_t>(index) * dtype_size(t.dtype);
}

// Consecutive 256-byte-aligned slices of the workspace for one op. Everything an op takes is
// free again when the next op starts: ops are queued on one stream, in order.
class WorkspaceCursor {
 public:
  WorkspaceCursor(void* base, std::size_t bytes)
      : base_(static_cast<std::byte*>(base)), bytes_(bytes) {}

  void* take(std::size_t bytes, const char* op) {
    const std::size_t size = workspace_footprint(bytes);
    if (size > bytes_ - used_) {
      throw Error(ErrorCode::kInternal,
                  std::string(op) + ": needs " + std::to_string(used_ + size) +
                      " bytes of the CUDA workspace, which has " + std::to_string(bytes_));
    }
    void* p = base_ + used_;
    used_ += size;
    return p;
  }

 private:
  std::byte* base_;
  std::size_t bytes_;
  std::size_t used_ = 0;
};

}  // namespace ferry::cuda::detail
