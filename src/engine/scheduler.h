// engine/scheduler.h — the request queue in front of an Engine: callers on any thread submit generation
// requests; one engine thread runs them and streams their tokens back through callbacks.
// Owns: the queue, the engine thread, cancellation, per-request accounting and the serving counters.
// Must not: parse HTTP, render chat templates or touch tensors (the Engine does the device work).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "engine/engine.h"

namespace helium {

struct SchedulerOptions {
  size_t max_queued = 256;  // requests waiting beyond this are refused at submit()
};

// Counters for /metrics; totals since the scheduler started.
struct SchedulerStats {
  uint64_t requests_submitted = 0;
  uint64_t requests_completed = 0;  // finished with a result (stop, length or cancelled)
  uint64_t requests_failed = 0;     // finished with an error
  uint64_t requests_refused = 0;    // refused at submit (queue full, too long for the context, shut down)
  uint64_t prompt_tokens = 0;
  uint64_t cached_prompt_tokens = 0;  // prompt tokens whose KV came from the prompt cache
  uint64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  size_t queue_depth = 0;  // waiting, not yet running
  size_t running = 0;
};

using RequestId = uint64_t;
// Called once when a request ends, on the engine thread: the result, or the error that ended it.
using DoneCallback = std::function<void(Result<GenerationResult>)>;

class Scheduler {
 public:
  Scheduler(Engine& engine, SchedulerOptions options = {});
  ~Scheduler();  // shutdown()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. on_token (may be null) runs on the engine thread for each token as
  // Engine::generate describes; returning false cancels the request. on_done runs exactly once, also on
  // the engine thread, unless submit() itself fails: a full queue, a scheduler that is shut down, or a
  // request that cannot fit the context (prompt + max_new_tokens > context; the message names the
  // sizes) is refused here with the reason, and no callback runs.
  Result<RequestId> submit(GenerationRequest request, TokenCallback on_token, DoneCallback on_done);

  // Cancels a queued or running request (finish_reason "cancelled"); unknown or finished ids are ignored.
  void cancel(RequestId id);

  // Stops accepting requests, cancels what is queued or running (each gets its on_done), joins the thread.
  void shutdown();

  SchedulerStats stats() const;
  const Engine& engine() const { return engine_; }

 private:
  struct Pending {
    RequestId id;
    GenerationRequest request;
    TokenCallback on_token;
    DoneCallback on_done;
  };
  void run_loop();

  Engine& engine_;
  SchedulerOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  RequestId next_id_ = 1;
  RequestId running_id_ = 0;
  std::atomic<bool> cancel_running_{false};
  bool stopping_ = false;
  SchedulerStats stats_;
  std::thread thread_;
};

}  // namespace helium
