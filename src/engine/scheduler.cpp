#include "engine/scheduler.h"

#include <utility>

namespace helium {

Scheduler::Scheduler(Engine& engine, SchedulerOptions options) : engine_(engine), options_(options) {
  thread_ = std::thread([this] { run_loop(); });
}

Scheduler::~Scheduler() { shutdown(); }

Result<RequestId> Scheduler::submit(GenerationRequest request, TokenCallback on_token, DoneCallback on_done) {
  const int64_t prompt_len = static_cast<int64_t>(request.prompt.size());
  const int64_t context = engine_.context();
  std::lock_guard lock(mutex_);
  auto refuse = [&](std::string message) -> Result<RequestId> {
    ++stats_.requests_refused;
    return Status::error(std::move(message));
  };
  if (stopping_) return refuse("the server is shutting down");
  if (prompt_len + 1 > context)
    return refuse("the prompt has " + std::to_string(prompt_len) + " tokens, more than the context of " +
                  std::to_string(context) + " tokens allows (it needs room for at least one generated token)");
  if (queue_.size() >= options_.max_queued)
    return refuse("the request queue is full (" + std::to_string(queue_.size()) + " requests waiting)");
  const RequestId id = next_id_++;
  queue_.push_back({id, std::move(request), std::move(on_token), std::move(on_done)});
  ++stats_.requests_submitted;
  wake_.notify_one();
  return id;
}

void Scheduler::cancel(RequestId id) {
  DoneCallback done;
  {
    std::lock_guard lock(mutex_);
    if (running_id_ == id) {
      cancel_running_ = true;
      return;
    }
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->id != id) continue;
      done = std::move(it->on_done);
      queue_.erase(it);
      ++stats_.requests_completed;
      break;
    }
  }
  if (done) {
    GenerationResult cancelled;
    cancelled.finish_reason = "cancelled";
    done(std::move(cancelled));
  }
}

void Scheduler::shutdown() {
  std::deque<Pending> dropped;
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    cancel_running_ = true;
    dropped.swap(queue_);
    stats_.requests_completed += dropped.size();
  }
  wake_.notify_all();
  for (auto& p : dropped) {
    GenerationResult cancelled;
    cancelled.finish_reason = "cancelled";
    if (p.on_done) p.on_done(std::move(cancelled));
  }
  if (thread_.joinable()) thread_.join();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats s = stats_;
  s.queue_depth = queue_.size();
  s.running = running_id_ != 0 ? 1 : 0;
  return s;
}

// One request at a time, in arrival order: the engine's generate() runs it to the end while later
// requests wait in the queue. Continuous batching (decode steps of several requests in one forward)
// replaces this loop without changing the interface.
void Scheduler::run_loop() {
  for (;;) {
    Pending job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      running_id_ = job.id;
      cancel_running_ = false;
    }
    auto on_token = [&](int32_t token, std::string_view text) {
      if (cancel_running_) return false;
      return job.on_token ? job.on_token(token, text) : true;
    };
    Result<GenerationResult> result = engine_.generate(job.request, on_token);
    if (result && cancel_running_) result->finish_reason = "cancelled";
    {
      std::lock_guard lock(mutex_);
      running_id_ = 0;
      if (result) {
        ++stats_.requests_completed;
        stats_.prompt_tokens += static_cast<uint64_t>(result->prompt_tokens);
        stats_.cached_prompt_tokens += static_cast<uint64_t>(result->cached_tokens);
        stats_.generated_tokens += result->tokens.size();
        stats_.prefill_seconds += result->prefill_seconds;
        stats_.decode_seconds += result->decode_seconds;
      } else {
        ++stats_.requests_failed;
      }
    }
    if (job.on_done) job.on_done(std::move(result));
  }
}

}  // namespace helium
