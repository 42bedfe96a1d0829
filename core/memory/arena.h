// An activation arena: a bump allocator over one block of memory (host or device) that a stage
// allocates once from its plan. Tensors come from it by allocate(); a mark/release pair frees
// everything after the mark at once (a layer's temporaries), and nothing else ever frees.
#pragma once

#include <cstddef>

#include "core/tensor/tensor.h"

namespace ferry::memory {

class Arena {
 public:
  static constexpr std::size_t kAlignment = 256;  // what cuBLAS and vector loads like

  Arena() = default;
  // Does not own [base, base + capacity): the caller keeps the block alive.
  Arena(void* base, std::size_t capacity, Device device);

  // A tensor of `shape` from the arena. Throws Error(kOutOfMemory) naming both sizes when the
  // arena is full: the plan that sized it was wrong.
  Tensor allocate(DType dtype, const Shape& shape);

  std::size_t mark() const { return used_; }
  // Frees every tensor allocated after `mark` (tensors from before it stay valid).
  void release_to(std::size_t mark);
  void reset() { release_to(0); }

  std::size_t used() const { return used_; }
  std::size_t peak() const { return peak_; }
  std::size_t capacity() const { return capacity_; }
  Device device() const { return device_; }

  // Bytes an allocation of this many bytes takes from an arena, alignment included.
  static std::size_t footprint(std::size_t bytes) {
    return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }

 private:
  std::byte* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  std::size_t peak_ = 0;
  Device device_ = Device::kCpu;
};

}  // namespace ferry::memory
