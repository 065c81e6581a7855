// server/generation_queue.h — what the server needs from the engine side: a queue that takes
// generation requests and calls back with tokens and the end (the Scheduler, or a scripted stand-in in
// tests), and the per-request channel that carries those callbacks from the engine thread to the HTTP
// thread that answers the request.
// Owns: the GenerationQueue interface, its Scheduler implementation and GenerationChannel. Must not:
// block the engine thread (the channel only buffers), touch tensors, or know HTTP.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "engine/engine.h"
#include "engine/scheduler.h"

namespace helium::server {

class GenerationQueue {
 public:
  virtual ~GenerationQueue() = default;
  // As Scheduler::submit: callbacks run on the queue's own thread; a refusal runs none of them.
  virtual Result<RequestId> submit(GenerationRequest request, TokenCallback on_token, DoneCallback on_done) = 0;
  virtual void cancel(RequestId id) = 0;
  virtual SchedulerStats stats() const = 0;
  // How the queue runs requests, for /health and the docs ("one at a time", ...).
  virtual std::string scheduling() const = 0;
};

// The real engine: a Scheduler. `scheduling` describes its policy for /health and the start-up line.
class SchedulerQueue final : public GenerationQueue {
 public:
  explicit SchedulerQueue(Scheduler& scheduler, std::string scheduling = "the engine's scheduler")
      : scheduler_(scheduler), scheduling_(std::move(scheduling)) {}
  Result<RequestId> submit(GenerationRequest request, TokenCallback on_token, DoneCallback on_done) override {
    return scheduler_.submit(std::move(request), std::move(on_token), std::move(on_done));
  }
  void cancel(RequestId id) override { scheduler_.cancel(id); }
  SchedulerStats stats() const override { return scheduler_.stats(); }
  std::string scheduling() const override { return scheduling_; }

 private:
  Scheduler& scheduler_;
  std::string scheduling_;
};

// One request's tokens on their way from the engine thread to the HTTP thread. The engine side only
// appends under a short lock and never waits, so a slow client cannot stall generation: its text
// accumulates here until the HTTP thread takes it.
class GenerationChannel {
 public:
  // Engine side.
  bool push_token(int32_t token, std::string_view text);  // returns false once cancelled (stops generation)
  void push_done(Result<GenerationResult> result);

  // HTTP side: waits until new text or the end is there, or `timeout` passes, then moves out what came.
  struct Update {
    std::string text;
    std::optional<Result<GenerationResult>> done;
  };
  Update wait(std::chrono::milliseconds timeout);
  // Waits at most `timeout` for the end: the result, or nothing if it has not come by then. The text on the
  // way is dropped (the result holds all of it).
  std::optional<Result<GenerationResult>> wait_done_for(std::chrono::milliseconds timeout);

  void cancel();
  bool cancelled() const;
  // Time from construction to the first token, in milliseconds; negative before it.
  double first_token_ms() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::string text_;
  std::optional<Result<GenerationResult>> done_;
  bool cancelled_ = false;
  std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  double first_token_ms_ = -1;
};

}  // namespace helium::server
