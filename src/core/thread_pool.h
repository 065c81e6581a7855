// core/thread_pool.h — a fixed pool of worker threads for data-parallel loops.
// Owns: worker threads and the fork/join of parallel_for. Must not: choose how work is split inside a
// reduction (callers partition by rows or output features only; DESIGN.md, batch invariance).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace helium {

class ThreadPool {
 public:
  // n_threads counts the calling thread; 0 picks the number of hardware threads.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over contiguous chunks covering [0, n), at most one chunk per thread, each at
  // least `grain` long (except the last). Returns when all chunks are done. Not reentrant.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0;
  int job_chunks_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

// Runs fn over [0, n) on `pool`, or inline when pool is null.
inline void parallel_for(ThreadPool* pool, int64_t n, int64_t grain,
                         const std::function<void(int64_t, int64_t)>& fn) {
  if (pool == nullptr || pool->size() == 1 || n <= grain) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->parallel_for(n, grain, fn);
}

}  // namespace helium
