#include "core/offload/cancel.h"

#include "core/error.h"
#include "core/offload/streamer.h"

namespace ferry::offload {

void CancelToken::cancel() {
  cancelled_.store(true, std::memory_order_release);
  std::lock_guard lock(mutex_);
  if (active_ != nullptr) active_->cancel();
}

void CancelToken::throw_if_cancelled() const {
  if (cancelled()) throw Error(ErrorCode::kCancelled, "generation cancelled");
}

CancelToken::StreamerGuard CancelToken::watch(WeightStreamer& streamer) {
  std::lock_guard lock(mutex_);
  active_ = &streamer;
  if (cancelled()) streamer.cancel();
  return StreamerGuard(*this);
}

CancelToken::StreamerGuard::~StreamerGuard() {
  std::lock_guard lock(token_.mutex_);
  token_.active_ = nullptr;
}

}  // namespace ferry::offload
