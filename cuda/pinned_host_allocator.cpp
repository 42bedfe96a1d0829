#include "cuda/pinned_host_allocator.h"

#include <cuda_runtime_api.h>

#include <string>

#include "cuda/cuda_error.h"

namespace ferry::cuda {

void* PinnedHostAllocator::allocate(std::size_t bytes, std::size_t alignment) {
  // cudaHostAlloc returns page-aligned memory; larger alignments are never asked for.
  if (alignment > memory::host_page_size()) {
    throw Error(ErrorCode::kInternal, "pinned memory is page aligned, not " +
                                          std::to_string(alignment) + "-byte aligned");
  }
  void* pointer = nullptr;
  const cudaError_t status = cudaHostAlloc(&pointer, bytes, cudaHostAllocPortable);
  if (status != cudaSuccess) {
    throw Error(ErrorCode::kOutOfMemory,
                "cannot pin " + std::to_string(bytes >> 20) + " MiB of host memory for the "
                "staging ring (" + cudaGetErrorString(status) + "): choose a preset with a "
                "smaller ring or close other programs");
  }
  return pointer;
}

void PinnedHostAllocator::deallocate(void* pointer, std::size_t) noexcept {
  cudaFreeHost(pointer);
}

}  // namespace ferry::cuda
