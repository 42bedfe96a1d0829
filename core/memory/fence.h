// A completion fence: something that finishes later (an upload on a copy stream, a copy on a
// worker thread) and can be waited for, on the host (wait) or by the backend that recorded it
// (Backend::wait_for, CopyQueue::wait_for). CUDA events implement it in cuda/; CpuFence here.
#pragma once

#include <condition_variable>
#include <mutex>

namespace ferry::memory {

class Fence {
 public:
  virtual ~Fence() = default;
  virtual void wait() = 0;
  virtual bool done() = 0;
  // The device event behind the fence (a cudaEvent_t), for the backend that recorded it to wait
  // on without the host; null for a fence a CPU thread signals. Fences belong to the backend
  // that made them: only it knows what the handle is.
  virtual void* device_event() const { return nullptr; }
};

// Signalled by a CPU thread. A pooled fence is re-armed with reset() once nobody waits on it.
class CpuFence final : public Fence {
 public:
  void reset() {
    std::lock_guard lock(mutex_);
    signalled_ = false;
  }
  void signal() {
    {
      std::lock_guard lock(mutex_);
      signalled_ = true;
    }
    cv_.notify_all();
  }
  void wait() override {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return signalled_; });
  }
  bool done() override {
    std::lock_guard lock(mutex_);
    return signalled_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool signalled_ = false;
};

}  // namespace ferry::memory
