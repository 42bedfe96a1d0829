// ThreadPool: the CPU backend's workers. One job at a time: parallel_for splits [0, n) into
// contiguous chunks that the pool's threads and the calling thread claim until none is left.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ferry::cpu {

// Never give a ThreadPool static storage duration: a pool destroyed at exit joins its workers
// while the exiting thread holds the loader lock on Windows, and hangs once a worker holds a
// thread_local with a destructor (see default_thread_pool). Leak a process-long pool instead.
class ThreadPool {
 public:
  // `threads` counts the caller too: a pool of 4 starts 3 workers. 0 means
  // std::thread::hardware_concurrency() (1 where the platform does not say).
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that run a job's chunks, the caller included.
  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // What a job runs: a callable seen through a pointer, valid for the parallel_for call. Not a
  // std::function, which copies the lambda to the heap when it captures more than two pointers:
  // every op of a step is a job, and a step must not allocate.
  class ChunkFn {
   public:
    template <typename F>
    explicit ChunkFn(F& fn)
        : object_(const_cast<void*>(static_cast<const void*>(&fn))),
          call_([](void* object, std::size_t begin, std::size_t end) {
            (*static_cast<F*>(object))(begin, end);
          }) {}
    void operator()(std::size_t begin, std::size_t end) const { call_(object_, begin, end); }

   private:
    void* object_;
    void (*call_)(void*, std::size_t, std::size_t);
  };

  // Runs fn(begin, end) over [0, n) split into contiguous chunks of at least `grain` (one chunk
  // of n when n < grain; grain 0 counts as 1), on the pool's threads and the caller's; returns
  // when all are done and rethrows the first exception a chunk threw (chunks not yet started
  // then never start). A call made from inside a chunk of any pool runs fn(0, n) inline, so
  // nested parallel code cannot deadlock; calls from several outside threads take turns.
  // Allocates nothing.
  template <typename F>
  void parallel_for(std::size_t n, std::size_t grain, F&& fn) {
    run_job(n, grain, ChunkFn(fn));
  }

 private:
  void run_job(std::size_t n, std::size_t grain, const ChunkFn& fn);
  void worker_loop();
  // Claims and runs chunks of the current job until none is left.
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;  // one job at a time

  std::mutex mutex_;
  std::condition_variable wake_;  // workers: a job was published, or stop
  std::condition_variable idle_;  // the caller: a worker left the job, or one is ready
  bool stop_ = false;
  unsigned ready_ = 0;  // workers that have taken their scratch (the constructor waits for all)
  unsigned long long generation_ = 0;  // counts published jobs
  bool job_open_ = false;              // workers may still join the current job
  unsigned active_ = 0;                // workers inside the current job

  // The current job; written by the caller before it is published, under mutex_.
  const ChunkFn* fn_ = nullptr;
  std::size_t n_ = 0;
  std::size_t chunks_ = 0;
  std::size_t next_chunk_ = 0;  // under mutex_ too: claims are rare next to the work they start
  std::exception_ptr error_;
};

// The process's pool, sized to the machine; created on first use.
ThreadPool& default_thread_pool();

}  // namespace ferry::cpu
