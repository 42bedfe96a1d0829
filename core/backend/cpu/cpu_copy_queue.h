// The CPU backend's CopyQueue: one worker thread runs the queued memcpys in order, so the
// streamer's upload stage overlaps compute on the CPU exactly as a copy stream does on a GPU.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/backend/backend.h"
#include "core/memory/fence_pool.h"

namespace ferry::cpu {

class CpuCopyQueue final : public CopyQueue {
 public:
  // Called on the worker before each copy; tests use it to slow the copy stage down.
  using CopyHook = void (*)(void* context);

  // `capacity`: queued jobs (copies and fences) before copy_to_device/record block; the queue
  // never allocates after construction.
  explicit CpuCopyQueue(std::size_t capacity = 256, CopyHook before_copy = nullptr,
                        void* hook_context = nullptr);
  // Runs every queued copy, signals every recorded fence, then stops the worker.
  ~CpuCopyQueue() override;
  CpuCopyQueue(const CpuCopyQueue&) = delete;
  CpuCopyQueue& operator=(const CpuCopyQueue&) = delete;

  void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) override;
  std::shared_ptr<memory::Fence> record() override;
  // The worker waits for `fence` before the copies queued after this call.
  void wait_for(const std::shared_ptr<memory::Fence>& fence) override;

 private:
  struct Job {
    void* dst = nullptr;
    const void* src = nullptr;
    std::size_t bytes = 0;
    std::shared_ptr<memory::CpuFence> fence;  // a fence job when set
    std::shared_ptr<memory::Fence> wait;      // a wait job when set
  };

  void push(Job job);
  void worker_loop();

  CopyHook before_copy_;
  void* hook_context_;
  memory::FencePool<memory::CpuFence> fences_;
  std::mutex mutex_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::vector<Job> jobs_;  // a ring of fixed capacity
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace ferry::cpu
