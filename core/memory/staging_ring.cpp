#include "core/memory/staging_ring.h"

#include "core/error.h"

namespace ferry::memory {

StagingRing::StagingRing(std::size_t slot_count, std::size_t slot_bytes,
                         HostAllocator& allocator) {
  if (slot_count == 0 || slot_bytes == 0) {
    throw Error(ErrorCode::kBadArgument, "a staging ring needs at least one non-empty slot");
  }
  const std::size_t page = host_page_size();
  slot_bytes_ = (slot_bytes + page - 1) / page * page;
  slots_.resize(slot_count);
  for (Slot& slot : slots_) slot.buffer = AlignedBuffer(slot_bytes_, page, allocator);
}

StagingRing::~StagingRing() {
  // A slot's memory may still be read by in-flight work: wait for every fence before freeing.
  for (Slot& slot : slots_) {
    if (slot.fence) slot.fence->wait();
  }
}

std::size_t StagingRing::acquire() {
  std::unique_lock lock(mutex_);
  const std::size_t index = next_;
  retired_.wait(lock, [&] { return shutdown_ || !slots_[index].in_use; });
  if (shutdown_) throw Error(ErrorCode::kCancelled, "the staging ring was shut down");
  Slot& slot = slots_[index];
  slot.in_use = true;
  next_ = (next_ + 1) % slots_.size();
  std::shared_ptr<Fence> fence = std::move(slot.fence);
  lock.unlock();
  if (fence) fence->wait();  // the previous reader of this slot has finished
  return index;
}

void StagingRing::retire(std::size_t index, std::shared_ptr<Fence> fence) {
  {
    std::lock_guard lock(mutex_);
    Slot& slot = slots_.at(index);
    if (!slot.in_use) {
      throw Error(ErrorCode::kInternal, "staging slot retired twice");
    }
    slot.in_use = false;
    slot.fence = std::move(fence);
  }
  retired_.notify_all();
}

StagingRing::Lease& StagingRing::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    retire(nullptr);
    ring_ = std::exchange(other.ring_, nullptr);
    index_ = other.index_;
  }
  return *this;
}

void StagingRing::Lease::retire(std::shared_ptr<Fence> fence) noexcept {
  if (ring_ == nullptr) return;
  // Cannot throw: a lease retires a slot it holds, exactly once.
  std::exchange(ring_, nullptr)->retire(index_, std::move(fence));
}

void StagingRing::shutdown() {
  {
    std::lock_guard lock(mutex_);
    shutdown_ = true;
  }
  retired_.notify_all();
}

}  // namespace ferry::memory
