#include "core/backend/cpu/thread_pool.h"

#include <algorithm>
#include <utility>

#include "core/backend/cpu/cpu_rows.h"
#include "core/backend/cpu/gemm_kernels.h"

namespace ferry::cpu {
namespace {

// True on a thread while it runs a chunk of some pool's job: a parallel_for from there runs
// inline instead of waiting for threads that may all be busy running the caller's own chunks.
thread_local bool t_inside_chunk = false;

class InsideChunk {
 public:
  InsideChunk() : previous_(std::exchange(t_inside_chunk, true)) {}
  ~InsideChunk() { t_inside_chunk = previous_; }
  InsideChunk(const InsideChunk&) = delete;
  InsideChunk& operator=(const InsideChunk&) = delete;

 private:
  bool previous_;
};

// More chunks than threads, so a thread that the OS (or another process) slows down holds up
// the job by a quarter of its share at most.
constexpr std::size_t kChunksPerThread = 4;

}  // namespace

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  try {
    workers_.reserve(threads - 1);
    for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
    // Each worker takes its scratch as it starts: wait for all, so that a thread the OS starts
    // late (on a loaded machine) does not allocate inside a later step instead.
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return ready_ == workers_.size(); });
  } catch (...) {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
    throw;
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::run_job(std::size_t n, std::size_t grain, const ChunkFn& fn) {
  if (n == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  const std::size_t chunks = std::min(std::max<std::size_t>(n / grain, 1),
                                      kChunksPerThread * static_cast<std::size_t>(size()));
  if (chunks == 1 || workers_.empty() || t_inside_chunk) {
    InsideChunk inside;
    fn(0, n);
    return;
  }

  std::lock_guard submit(submit_mutex_);
  {
    std::lock_guard lock(mutex_);
    fn_ = &fn;
    n_ = n;
    chunks_ = chunks;
    next_chunk_ = 0;
    error_ = nullptr;
    job_open_ = true;
    ++generation_;
  }
  wake_.notify_all();
  run_chunks();

  std::exception_ptr error;
  {
    // Every chunk has been claimed; wait for the workers still running theirs. Closing the job
    // under the same lock means no late worker can join it after this.
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return active_ == 0; });
    job_open_ = false;
    fn_ = nullptr;
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::worker_loop() {
  // The CPU backend's per-thread scratch, taken now rather than in whichever step first hands
  // this thread a chunk: after the first step, a step allocates nothing.
  try {
    detail::reserve_row_buffers();
    gemm_detail::reserve_thread_buffers();
  } catch (...) {
    // Memory refused now is asked for again where a buffer is first used, which reports it.
  }
  unsigned long long seen = 0;
  std::unique_lock lock(mutex_);
  ++ready_;
  idle_.notify_all();
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (!job_open_) continue;
    ++active_;
    lock.unlock();
    run_chunks();
    lock.lock();
    if (--active_ == 0) idle_.notify_one();
  }
}

void ThreadPool::run_chunks() {
  InsideChunk inside;
  for (;;) {
    std::size_t begin = 0;
    std::size_t end = 0;
    {
      std::lock_guard lock(mutex_);
      if (next_chunk_ >= chunks_) return;
      const std::size_t chunk = next_chunk_++;
      // Chunk c is [c*q + min(c, r), ...): sizes differ by one at most, none below n / chunks.
      const std::size_t q = n_ / chunks_;
      const std::size_t r = n_ % chunks_;
      begin = chunk * q + std::min(chunk, r);
      end = begin + q + (chunk < r ? 1 : 0);
    }
    try {
      (*fn_)(begin, end);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
      next_chunk_ = chunks_;  // the job has failed: start nothing more
    }
  }
}

ThreadPool& default_thread_pool() {
  // Never destroyed: joining its workers from a static destructor at exit hangs on Windows
  // (mingw-w64 under Wine, reproduced with a 15-line program) once a worker holds a thread_local
  // with a destructor (its scratch buffers): the worker cannot finish while the exiting thread
  // holds the loader lock. The process's end stops the workers instead.
  static ThreadPool& pool = *new ThreadPool;
  return pool;
}

}  // namespace ferry::cpu
