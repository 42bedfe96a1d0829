#include "cuda/event_fence.h"

#include "cuda/cuda_error.h"

namespace ferry::cuda {

EventFence::EventFence(cudaStream_t stream) {
  check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
  const cudaError_t status = cudaEventRecord(event_, stream);
  if (status != cudaSuccess) {
    cudaEventDestroy(event_);
    throw cuda_error("cudaEventRecord", status);
  }
}

EventFence::~EventFence() { cudaEventDestroy(event_); }

void EventFence::wait() { check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }

bool EventFence::done() {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) return false;
  check(status, "cudaEventQuery");
  return true;
}

}  // namespace ferry::cuda
