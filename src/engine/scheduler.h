// engine/scheduler.h — the request queue in front of an Engine: callers on any thread submit generation
// requests; one engine thread runs them and streams their tokens back through callbacks.
// Owns: the queue, the engine thread, cancellation, per-request accounting and the serving counters.
// Must not: parse HTTP, render chat templates or touch tensors (the Engine does the device work).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace helium {

struct SchedulerOptions {
  size_t max_queued = 256;  // requests waiting beyond this are refused at submit()
  int max_batch = 16;       // generations decoding together (capped by the engine's max_batch())
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
  uint64_t decode_steps = 0;       // batched forwards
  uint64_t decode_step_rows = 0;   // generations summed over those steps (rows / steps = mean batch)
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

  // Queues a request. Admitted requests decode together, one row each per forward (continuous batching):
  // a new request's prompt is prefilled a chunk at a time between decode steps and then it joins the
  // batch; one that needs more KV
  // room than is free waits until earlier ones finish. on_token (may be null) runs on the engine thread
  // for each token as
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
    std::shared_ptr<std::atomic<bool>> cancelled;
  };
  struct Running {
    Pending job;
    std::unique_ptr<ActiveGeneration> generation;
  };
  void run_loop();
  // Ends a request: counters, then its on_done (outside the lock).
  void finish(Pending& job, Result<GenerationResult> result);

  Engine& engine_;
  SchedulerOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  RequestId next_id_ = 1;
  std::vector<std::pair<RequestId, std::shared_ptr<std::atomic<bool>>>> running_;  // ids and cancel flags
  bool stopping_ = false;
  SchedulerStats stats_;
  std::thread thread_;
};

}  // namespace helium
