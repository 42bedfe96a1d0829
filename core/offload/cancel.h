// One run's cancellation: a token the front end holds and cancels from any thread (a button, a
// Ctrl+C watcher), and that every stage of the run checks between layers. The stage that streams
// weights hands its streamer to the token for as long as it runs, so a cancel also wakes an
// acquire() that is waiting for the disk (architecture.md §4: a cancel lands within one layer).
// A token is never reset: a new run takes a new token, so a cancel that arrives between two
// stages, or before the run starts, is never lost.
#pragma once

#include <atomic>
#include <mutex>

namespace ferry::offload {

class WeightStreamer;

class CancelToken {
 public:
  CancelToken() = default;
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // Any thread, any number of times.
  void cancel();
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }
  // Error(kCancelled) once cancel() was called.
  void throw_if_cancelled() const;
  // The flag itself, for code that polls an atomic (the text encoder between blocks).
  const std::atomic<bool>& flag() const noexcept { return cancelled_; }

  // While the returned guard lives, cancel() also cancels `streamer` (at once if the token is
  // already cancelled). One streamer at a time: stages run one after another.
  class StreamerGuard {
   public:
    StreamerGuard(StreamerGuard&&) = delete;
    ~StreamerGuard();

   private:
    friend class CancelToken;
    explicit StreamerGuard(CancelToken& token) : token_(token) {}
    CancelToken& token_;
  };
  [[nodiscard]] StreamerGuard watch(WeightStreamer& streamer);

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  WeightStreamer* active_ = nullptr;
};

}  // namespace ferry::offload
