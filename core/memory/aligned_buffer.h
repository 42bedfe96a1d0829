// An owned, aligned block of host memory: page-aligned plain memory, or pinned memory from a
// HostAllocator (the CUDA backend supplies one). Move-only; freed by its destructor.
#pragma once

#include <cstddef>
#include <span>
#include <utility>

namespace ferry::memory {

// Where host buffers come from. The default gives plain aligned memory; the CUDA backend's
// allocator gives page-locked (pinned) memory that the GPU can copy from asynchronously.
class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  // Returns memory aligned to at least `alignment` (a power of two ≤ the page size), or throws
  // Error(kOutOfMemory).
  virtual void* allocate(std::size_t bytes, std::size_t alignment) = 0;
  virtual void deallocate(void* pointer, std::size_t bytes) noexcept = 0;
  virtual bool pinned() const noexcept = 0;
};

// Page-aligned, pageable memory (aligned_alloc / _aligned_malloc).
HostAllocator& plain_host_allocator();

std::size_t host_page_size();

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(std::size_t bytes, std::size_t alignment,
                HostAllocator& allocator = plain_host_allocator());
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : allocator_(std::exchange(other.allocator_, nullptr)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { reset(); }

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<std::byte> span() const { return {data_, size_}; }
  bool pinned() const { return allocator_ != nullptr && allocator_->pinned(); }
  void reset() noexcept;

 private:
  HostAllocator* allocator_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ferry::memory
