// A memory::Fence backed by a CUDA event recorded on a stream: the staging ring waits on it
// before refilling a slot whose upload was queued on the copy stream.
#pragma once

#include <cuda_runtime_api.h>

#include "core/memory/fence.h"

namespace ferry::cuda {

class EventFence final : public memory::Fence {
 public:
  // Records a fresh event on `stream` (timing disabled: cheaper to record and query).
  explicit EventFence(cudaStream_t stream);
  ~EventFence() override;
  EventFence(const EventFence&) = delete;
  EventFence& operator=(const EventFence&) = delete;

  void wait() override;
  bool done() override;
  void* device_event() const override { return event_; }
  cudaEvent_t event() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace ferry::cuda
