// The staging ring: a fixed number of page-aligned host slots, allocated once, through which
// weights travel from the file to the device. Pinned when the allocator is the CUDA backend's.
//
// The IO thread acquires slots in ring order and fills them; whoever consumes a slot (an upload
// on a copy stream, a copy on a worker) retires it with the fence of that work. A slot is handed
// out again only after its fence has completed: a slot is never refilled under a reader.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "core/memory/aligned_buffer.h"
#include "core/memory/fence.h"

namespace ferry::memory {

class StagingRing {
 public:
  // Allocates slot_count slots of slot_bytes each (rounded up to the page size), now and once.
  StagingRing(std::size_t slot_count, std::size_t slot_bytes,
              HostAllocator& allocator = plain_host_allocator());
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;
  ~StagingRing();

  std::size_t slot_count() const { return slots_.size(); }
  std::size_t slot_bytes() const { return slot_bytes_; }
  std::size_t total_bytes() const { return slot_bytes_ * slots_.size(); }
  bool pinned() const { return slots_.front().buffer.pinned(); }

  // Producer: waits until the next slot in ring order is free — retired and its fence done —
  // and hands it out. Throws Error(kCancelled) once shutdown() has been called.
  std::size_t acquire();

  std::span<std::byte> slot(std::size_t index) const { return slots_.at(index).buffer.span(); }

  // Consumer: the work that reads slot `index` completes when `fence` does (nullptr: already
  // complete). The slot may be handed out again after that.
  void retire(std::size_t index, std::shared_ptr<Fence> fence);

  // Wakes every waiter in acquire() with Error(kCancelled); used to stop the IO thread.
  void shutdown();

  // acquire() and retire() as an owner: a slot whose holder lets go without retiring it (an
  // exception on the way, say) is retired with no fence, so the ring can never lose a slot.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept
        : ring_(std::exchange(other.ring_, nullptr)), index_(other.index_) {}
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { retire(nullptr); }

    std::size_t index() const { return index_; }
    std::span<std::byte> bytes() const { return ring_->slot(index_); }
    // Hands the slot back; it is reused once `fence` completes. Idempotent.
    void retire(std::shared_ptr<Fence> fence) noexcept;

   private:
    friend class StagingRing;
    Lease(StagingRing* ring, std::size_t index) : ring_(ring), index_(index) {}
    StagingRing* ring_ = nullptr;
    std::size_t index_ = 0;
  };

  Lease lease() { return Lease(this, acquire()); }

 private:
  struct Slot {
    AlignedBuffer buffer;
    bool in_use = false;
    std::shared_ptr<Fence> fence;
  };

  std::size_t slot_bytes_;
  std::vector<Slot> slots_;
  std::size_t next_ = 0;
  bool shutdown_ = false;
  std::mutex mutex_;
  std::condition_variable retired_;
};

}  // namespace ferry::memory
