// Internal helpers of the CUDA backend's entry points (cuda_backend*.cpp): argument checks and
// the workspace cursor. Not part of any interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/tensor/tensor.h"
#include "cuda/convert.cuh"
#include "cuda/gemm_plan.h"

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
