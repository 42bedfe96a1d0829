// Page-locked host memory from the CUDA runtime, for the staging ring: the copy engine reads it
// with cudaMemcpyAsync while the CPU fills the next slot.
#pragma once

#include "core/memory/aligned_buffer.h"

namespace ferry::cuda {

class PinnedHostAllocator final : public memory::HostAllocator {
 public:
  // cudaHostAlloc (portable: usable from every device); Error(kOutOfMemory) when refused.
  void* allocate(std::size_t bytes, std::size_t alignment) override;
  void deallocate(void* pointer, std::size_t bytes) noexcept override;
  bool pinned() const noexcept override { return true; }
};

}  // namespace ferry::cuda
