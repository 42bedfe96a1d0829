// StagingRing: slots allocated once, handed out in ring order, never refilled before the fence
// of the work that read them has completed.
#include "core/memory/staging_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "core/error.h"

namespace ferry::memory {
namespace {

class CountingAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes, std::size_t alignment) override {
    ++allocations;
    allocated_bytes += bytes;
    return plain_host_allocator().allocate(bytes, alignment);
  }
  void deallocate(void* pointer, std::size_t bytes) noexcept override {
    ++deallocations;
    plain_host_allocator().deallocate(pointer, bytes);
  }
  bool pinned() const noexcept override { return false; }
  int allocations = 0;
  int deallocations = 0;
  std::size_t allocated_bytes = 0;
};

TEST(StagingRing, allocates_every_slot_once_up_front_and_frees_them_at_the_end) {
  CountingAllocator allocator;
  {
    StagingRing ring(3, 1000, allocator);
    EXPECT_EQ(allocator.allocations, 3);
    EXPECT_EQ(ring.slot_bytes() % host_page_size(), 0u);
    EXPECT_GE(ring.slot_bytes(), 1000u);
    EXPECT_EQ(ring.total_bytes(), 3 * ring.slot_bytes());
    for (int i = 0; i < 1000; ++i) {
      const std::size_t slot = ring.acquire();
      ring.slot(slot)[0] = std::byte{1};
      ring.retire(slot, nullptr);
    }
    EXPECT_EQ(allocator.allocations, 3);
    EXPECT_EQ(allocator.deallocations, 0);
  }
  EXPECT_EQ(allocator.deallocations, 3);
}

TEST(StagingRing, slots_are_page_aligned_and_distinct) {
  StagingRing ring(4, 12345);
  for (std::size_t i = 0; i < ring.slot_count(); ++i) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ring.slot(i).data()) % host_page_size(), 0u);
    for (std::size_t j = 0; j < i; ++j) EXPECT_NE(ring.slot(i).data(), ring.slot(j).data());
  }
}

TEST(StagingRing, hands_out_slots_in_ring_order) {
  StagingRing ring(3, 4096);
  for (std::size_t expected : {0u, 1u, 2u, 0u, 1u, 2u, 0u}) {
    const std::size_t slot = ring.acquire();
    EXPECT_EQ(slot, expected);
    ring.retire(slot, nullptr);
  }
}

TEST(StagingRing, a_slot_is_not_refilled_before_its_readers_fence_completes) {
  StagingRing ring(2, 4096);
  const std::size_t first = ring.acquire();
  auto fence = std::make_shared<CpuFence>();
  ring.retire(first, fence);
  const std::size_t second = ring.acquire();
  ring.retire(second, nullptr);

  std::atomic<bool> acquired{false};
  std::thread producer([&] {
    const std::size_t again = ring.acquire();  // slot `first`: must wait for the fence
    EXPECT_EQ(again, first);
    acquired = true;
    ring.retire(again, nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(acquired.load()) << "slot handed out while its upload was still reading it";
  fence->signal();
  producer.join();
  EXPECT_TRUE(acquired.load());
}

TEST(StagingRing, a_slot_still_held_by_its_consumer_is_not_handed_out) {
  StagingRing ring(1, 4096);
  const std::size_t slot = ring.acquire();
  std::atomic<bool> acquired{false};
  std::thread producer([&] {
    ring.retire(ring.acquire(), nullptr);
    acquired = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(acquired.load());
  ring.retire(slot, nullptr);
  producer.join();
  EXPECT_TRUE(acquired.load());
}

TEST(StagingRing, retiring_a_free_slot_is_an_internal_error) {
  StagingRing ring(2, 4096);
  const std::size_t slot = ring.acquire();
  ring.retire(slot, nullptr);
  try {
    ring.retire(slot, nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
}

TEST(StagingRing, shutdown_wakes_a_waiting_producer_with_cancelled) {
  StagingRing ring(1, 4096);
  const std::size_t slot = ring.acquire();
  std::atomic<int> code{-1};
  std::thread producer([&] {
    try {
      (void)ring.acquire();
    } catch (const Error& e) {
      code = static_cast<int>(e.code());
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ring.shutdown();
  producer.join();
  EXPECT_EQ(code.load(), static_cast<int>(ErrorCode::kCancelled));
  ring.retire(slot, nullptr);
}

TEST(StagingRing, destruction_waits_for_outstanding_fences) {
  auto fence = std::make_shared<CpuFence>();
  std::atomic<bool> signalled{false};
  std::thread worker;
  {
    StagingRing ring(2, 4096);
    ring.retire(ring.acquire(), fence);
    worker = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      signalled = true;
      fence->signal();
    });
  }
  EXPECT_TRUE(signalled.load()) << "ring memory freed while a reader was still using it";
  worker.join();
}

TEST(StagingRing, a_lease_dropped_on_an_exception_gives_its_slot_back) {
  StagingRing ring(1, 4096);
  try {
    StagingRing::Lease lease = ring.lease();
    lease.bytes()[0] = std::byte{7};
    throw Error(ErrorCode::kIo, "the read failed");
  } catch (const Error&) {
  }
  // With the slot lost, this would wait forever.
  StagingRing::Lease again = ring.lease();
  EXPECT_EQ(again.index(), 0u);
  auto fence = std::make_shared<CpuFence>();
  again.retire(fence);
  again.retire(nullptr);  // idempotent: the fence stays the slot's
  std::atomic<bool> acquired{false};
  std::thread producer([&] {
    StagingRing::Lease third = ring.lease();
    acquired = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(acquired.load());
  fence->signal();
  producer.join();
  EXPECT_TRUE(acquired.load());
}

TEST(StagingRing, empty_rings_are_refused) {
  EXPECT_THROW(StagingRing(0, 4096), Error);
  EXPECT_THROW(StagingRing(2, 0), Error);
}

}  // namespace
}  // namespace ferry::memory
