// ThreadPool: every index exactly once, in chunks of at least the grain, on several threads;
// exceptions reach the caller; nested and concurrent calls neither deadlock nor lose work.
#include "core/backend/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace ferry::cpu {
namespace {

TEST(ThreadPool, size_counts_the_calling_thread) {
  EXPECT_EQ(ThreadPool(1).size(), 1u);
  EXPECT_EQ(ThreadPool(3).size(), 3u);
  EXPECT_EQ(ThreadPool(0).size(), std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_GE(default_thread_pool().size(), 1u);
  EXPECT_EQ(&default_thread_pool(), &default_thread_pool());
}

TEST(ThreadPool, covers_every_index_exactly_once_in_chunks_of_at_least_the_grain) {
  const std::size_t sizes[] = {0, 1, 2, 3, 7, 64, 100, 1000, 4097};
  const std::size_t grains[] = {0, 1, 3, 64, 5000};
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    ThreadPool pool(threads);
    for (std::size_t n : sizes) {
      for (std::size_t grain : grains) {
        SCOPED_TRACE(testing::Message()
                     << "threads " << threads << " n " << n << " grain " << grain);
        std::vector<std::atomic<int>> hits(n);
        std::mutex mutex;
        std::vector<std::pair<std::size_t, std::size_t>> chunks;
        pool.parallel_for(n, grain, [&](std::size_t begin, std::size_t end) {
          for (std::size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
          std::lock_guard lock(mutex);
          chunks.emplace_back(begin, end);
        });
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i;
        if (n == 0) {
          EXPECT_TRUE(chunks.empty());
          continue;
        }
        for (const auto& [begin, end] : chunks) {
          EXPECT_LT(begin, end);
          EXPECT_GE(end - begin, std::min(std::max<std::size_t>(grain, 1), n));
        }
      }
    }
  }
}

TEST(ThreadPool, runs_chunks_on_the_pool_threads_as_well_as_the_caller) {
  ThreadPool pool(4);
  std::mutex mutex;
  std::condition_variable joined;
  std::set<std::thread::id> ids;
  // Every chunk waits (10 s at most) until a second thread has one: only a pool whose workers
  // never take part would time out, however slowly the OS schedules them.
  pool.parallel_for(16, 1, [&](std::size_t, std::size_t) {
    std::unique_lock lock(mutex);
    ids.insert(std::this_thread::get_id());
    joined.notify_all();
    joined.wait_for(lock, std::chrono::seconds(10), [&] { return ids.size() >= 2; });
  });
  EXPECT_GE(ids.size(), 2u);
}

TEST(ThreadPool, rethrows_an_exception_from_a_chunk_and_stays_usable) {
  ThreadPool pool(3);
  for (std::size_t bad : {std::size_t{0}, std::size_t{500}, std::size_t{999}}) {
    EXPECT_THROW(pool.parallel_for(1000, 1,
                                   [&](std::size_t begin, std::size_t end) {
                                     if (begin <= bad && bad < end) {
                                       throw std::runtime_error("chunk failed");
                                     }
                                   }),
                 std::runtime_error);
  }
  // Every chunk throws: one exception arrives, not a crash.
  EXPECT_THROW(pool.parallel_for(64, 1, [](std::size_t, std::size_t) { throw 7; }), int);

  std::atomic<std::size_t> sum = 0;
  pool.parallel_for(100, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950u);
}

TEST(ThreadPool, a_call_from_inside_a_chunk_runs_inline_without_deadlock) {
  ThreadPool pool(3);
  std::atomic<std::size_t> inner_total = 0;
  std::atomic<int> inner_on_other_thread = 0;
  pool.parallel_for(12, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t outer = begin; outer < end; ++outer) {
      const auto self = std::this_thread::get_id();
      pool.parallel_for(100, 1, [&](std::size_t b, std::size_t e) {
        if (std::this_thread::get_id() != self) ++inner_on_other_thread;
        // A third level, on another pool: still inline.
        ThreadPool other(2);
        other.parallel_for(e - b, 1,
                           [&](std::size_t b2, std::size_t e2) { inner_total += e2 - b2; });
      });
    }
  });
  EXPECT_EQ(inner_total.load(), 1200u);
  EXPECT_EQ(inner_on_other_thread.load(), 0);
}

TEST(ThreadPool, serves_several_calling_threads_at_once) {
  ThreadPool pool(3);
  constexpr int kCallers = 4;
  constexpr int kCalls = 200;
  std::vector<std::size_t> sums(kCallers, 0);
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      for (int call = 0; call < kCalls; ++call) {
        std::atomic<std::size_t> sum = 0;
        pool.parallel_for(257, 1, [&](std::size_t begin, std::size_t end) {
          for (std::size_t i = begin; i < end; ++i) sum += i;
        });
        sums[t] += sum.load();
      }
    });
  }
  for (auto& caller : callers) caller.join();
  for (int t = 0; t < kCallers; ++t) EXPECT_EQ(sums[t], std::size_t{kCalls} * 256 * 257 / 2);
}

}  // namespace
}  // namespace ferry::cpu
