#include "core/backend/cpu/cpu_copy_queue.h"

#include <cstring>
#include <utility>

#include "core/error.h"

namespace ferry::cpu {

namespace {

std::shared_ptr<memory::CpuFence> make_fence() {
  return std::make_shared<memory::CpuFence>();
}

}  // namespace

CpuCopyQueue::CpuCopyQueue(std::size_t capacity, CopyHook before_copy, void* hook_context)
    : before_copy_(before_copy),
      hook_context_(hook_context),
      fences_(32, make_fence),
      jobs_(capacity == 0 ? 1 : capacity) {
  worker_ = std::thread([this] { worker_loop(); });
}

CpuCopyQueue::~CpuCopyQueue() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  not_empty_.notify_all();
  worker_.join();
}

void CpuCopyQueue::push(Job job) {
  {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [this] { return count_ < jobs_.size(); });
    jobs_[(head_ + count_) % jobs_.size()] = std::move(job);
    ++count_;
  }
  not_empty_.notify_one();
}

void CpuCopyQueue::copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  push(Job{device_dst, host_src, bytes, nullptr, nullptr});
}

void CpuCopyQueue::wait_for(const std::shared_ptr<memory::Fence>& fence) {
  if (!fence || fence->done()) return;  // the CPU's compute fences: complete when recorded
  push(Job{nullptr, nullptr, 0, nullptr, fence});
}

std::shared_ptr<memory::Fence> CpuCopyQueue::record() {
  std::shared_ptr<memory::CpuFence> fence = fences_.take(make_fence);
  fence->reset();
  push(Job{nullptr, nullptr, 0, fence, nullptr});
  return fence;
}

void CpuCopyQueue::worker_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      // Stops only once the queue is empty: every fence handed out gets signalled.
      not_empty_.wait(lock, [this] { return stop_ || count_ > 0; });
      if (count_ == 0) return;
      job = std::move(jobs_[head_]);
      head_ = (head_ + 1) % jobs_.size();
      --count_;
    }
    not_full_.notify_one();
    if (job.fence) {
      job.fence->signal();
    } else if (job.wait) {
      job.wait->wait();
    } else {
      if (before_copy_ != nullptr) before_copy_(hook_context_);
      std::memcpy(job.dst, job.src, job.bytes);
    }
  }
}

}  // namespace ferry::cpu
