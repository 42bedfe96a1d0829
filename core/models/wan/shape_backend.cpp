#include "core/models/wan/shape_backend.h"

#include <cstddef>

#include "core/error.h"

namespace ferry::models::wan {

std::unique_ptr<DeviceBuffer> ShapeBackend::allocate(std::size_t) {
  throw Error(ErrorCode::kInternal, "the shapes-only backend has no memory");
}

memory::HostAllocator& ShapeBackend::host_allocator() {
  return memory::plain_host_allocator();
}

std::unique_ptr<CopyQueue> ShapeBackend::create_copy_queue() {
  throw Error(ErrorCode::kInternal, "the shapes-only backend does not copy");
}

std::shared_ptr<memory::Fence> ShapeBackend::record_compute() {
  throw Error(ErrorCode::kInternal, "the shapes-only backend records no fences");
}

memory::Arena shapes_only_arena() {
  // A real (never dereferenced) address, so the arena's pointer arithmetic starts from an object
  // rather than from null; the capacity is beyond any VAE run.
  alignas(memory::Arena::kAlignment) static std::byte anchor[memory::Arena::kAlignment];
  return memory::Arena(anchor, std::size_t{1} << 46, Device::kCpu);
}

}  // namespace ferry::models::wan
