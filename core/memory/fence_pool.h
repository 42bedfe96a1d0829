// Fences that are reused instead of allocated: a copy queue or a compute stream records a fence
// per uploaded block, and a step must not allocate (architecture.md §3 rule 3). A pooled fence is
// handed out again only when nobody but the pool holds it any more.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "core/memory/fence.h"

namespace ferry::memory {

// Owns fences of type F. take() returns one that only the pool held (so no waiter can see it
// re-armed); the pool grows only when more fences are alive at once than ever before, which a
// fixed pipeline reaches in its first step.
template <typename F>
class FencePool {
 public:
  template <typename Make>
  FencePool(std::size_t initial, Make make) {
    fences_.reserve(initial);
    for (std::size_t i = 0; i < initial; ++i) fences_.push_back(make());
  }

  // `make` creates a fence when every pooled one is still held somewhere.
  template <typename Make>
  std::shared_ptr<F> take(Make make) {
    std::lock_guard lock(mutex_);
    const std::size_t n = fences_.size();
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t index = (next_ + i) % n;
      // use_count() == 1: only the pool holds it, and only the pool (under mutex_) copies it.
      if (fences_[index].use_count() == 1) {
        next_ = (index + 1) % n;
        return fences_[index];
      }
    }
    fences_.push_back(make());
    next_ = 0;
    return fences_.back();
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<F>> fences_;
  std::size_t next_ = 0;
};

}  // namespace ferry::memory
