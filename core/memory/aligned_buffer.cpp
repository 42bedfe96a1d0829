#include "core/memory/aligned_buffer.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

#ifdef _WIN32
#include <malloc.h>
#include <windows.h>
#else
#include <unistd.h>
#endif

namespace ferry::memory {
namespace {

class PlainHostAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes, std::size_t alignment) override {
    if (alignment < host_page_size()) alignment = host_page_size();
    const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    if (rounded < bytes) throw Error(ErrorCode::kOutOfMemory, "host allocation size overflows");
#ifdef _WIN32
    void* p = _aligned_malloc(rounded, alignment);
#else
    void* p = std::aligned_alloc(alignment, rounded);
#endif
    if (p == nullptr) {
      throw Error(ErrorCode::kOutOfMemory,
                  "cannot allocate " + std::to_string(bytes >> 20) + " MiB of host memory");
    }
    return p;
  }
  void deallocate(void* pointer, std::size_t) noexcept override {
#ifdef _WIN32
    _aligned_free(pointer);
#else
    std::free(pointer);
#endif
  }
  bool pinned() const noexcept override { return false; }
};

}  // namespace

HostAllocator& plain_host_allocator() {
  static PlainHostAllocator allocator;
  return allocator;
}

std::size_t host_page_size() {
#ifdef _WIN32
  static const std::size_t size = [] {
    SYSTEM_INFO info;
    GetSystemInfo(&info);
    return static_cast<std::size_t>(info.dwPageSize);
  }();
#else
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
#endif
  return size;
}

AlignedBuffer::AlignedBuffer(std::size_t bytes, std::size_t alignment, HostAllocator& allocator)
    : allocator_(&allocator), size_(bytes) {
  if (bytes == 0) return;
  data_ = static_cast<std::byte*>(allocator.allocate(bytes, alignment));
}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    allocator_ = std::exchange(other.allocator_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void AlignedBuffer::reset() noexcept {
  if (data_ != nullptr) allocator_->deallocate(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace ferry::memory
