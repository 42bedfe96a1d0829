#include "core/memory/arena.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ferry::memory {

Arena::Arena(void* base, std::size_t capacity, Device device)
    : base_(static_cast<std::byte*>(base)), capacity_(capacity), device_(device) {}

Tensor Arena::allocate(DType dtype, const Shape& shape) {
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  const std::size_t need = footprint(bytes);
  if (need > capacity_ - used_) {
    throw Error(ErrorCode::kOutOfMemory,
                "the activation arena (" + std::to_string(capacity_ >> 20) + " MiB, " +
                    std::to_string(used_ >> 20) + " MiB in use) cannot hold another " +
                    std::to_string(bytes) + " bytes for a " + std::string(dtype_name(dtype)) +
                    shape.str() + " tensor");
  }
  Tensor t;
  t.data = base_ + used_;
  t.dtype = dtype;
  t.shape = shape;
  t.device = device_;
  used_ += need;
  peak_ = std::max(peak_, used_);
  return t;
}

void Arena::release_to(std::size_t mark) {
  if (mark > used_) throw Error(ErrorCode::kInternal, "arena released to a mark above its use");
  used_ = mark;
}

}  // namespace ferry::memory
