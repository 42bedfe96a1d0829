// CUDA runtime failures as ferry::Error, with the runtime's own text.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "core/error.h"

namespace ferry::cuda {

inline Error cuda_error(std::string_view what, cudaError_t status) {
  const ErrorCode code = status == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory
                         : status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver
                             ? ErrorCode::kUnsupported
                             : ErrorCode::kInternal;
  return Error(code, std::string(what) + ": " + cudaGetErrorString(status));
}

inline void check(cudaError_t status, std::string_view what) {
  if (status != cudaSuccess) throw cuda_error(what, status);
}

}  // namespace ferry::cuda
