#include "engine/scheduler.h"

#include <algorithm>
#include <utility>

namespace helium {

Scheduler::Scheduler(Engine& engine, SchedulerOptions options) : engine_(engine), options_(options) {
  options_.max_batch = std::clamp(options_.max_batch, 1, engine_.max_batch());
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
  queue_.push_back({id, std::move(request), std::move(on_token), std::move(on_done),
                    std::make_shared<std::atomic<bool>>(false)});
  ++stats_.requests_submitted;
  wake_.notify_one();
  return id;
}

void Scheduler::cancel(RequestId id) {
  Pending dropped;
  bool found = false;
  {
    std::lock_guard lock(mutex_);
    for (auto& [running_id, flag] : running_)
      if (running_id == id) {
        *flag = true;
        return;
      }
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->id != id) continue;
      dropped = std::move(*it);
      queue_.erase(it);
      found = true;
      break;
    }
  }
  if (found) {
    GenerationResult cancelled;
    cancelled.finish_reason = "cancelled";
    finish(dropped, std::move(cancelled));
  }
}

void Scheduler::shutdown() {
  std::deque<Pending> dropped;
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    for (auto& entry : running_) *entry.second = true;
    dropped.swap(queue_);
  }
  wake_.notify_all();
  for (auto& p : dropped) {
    GenerationResult cancelled;
    cancelled.finish_reason = "cancelled";
    finish(p, std::move(cancelled));
  }
  if (thread_.joinable()) thread_.join();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats s = stats_;
  s.queue_depth = queue_.size();
  s.running = running_.size();
  return s;
}

void Scheduler::finish(Pending& job, Result<GenerationResult> result) {
  {
    std::lock_guard lock(mutex_);
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

// The engine thread: admit what fits, run one prefill chunk of each generation still prefilling, then one
// decode step for every prefilled generation together, end the finished ones; sleep when there is nothing
// to do. A long prompt so takes its chunks between the others' decode steps instead of stalling them for
// its whole prefill, and a request cancelled while prefilling stops at its next chunk. Requests are admitted
// in arrival order: one that does not fit the free KV yet holds back the ones behind it (no overtaking).
void Scheduler::run_loop() {
  std::vector<Running> active;
  auto forget = [&](RequestId id) {
    std::lock_guard lock(mutex_);
    std::erase_if(running_, [&](const auto& r) { return r.first == id; });
  };
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active.empty(); });
      if (stopping_ && active.empty()) return;
    }
    // Admit one request at a time: each begin() reserves its KV pages, which the next check must see.
    for (;;) {
      Pending job;
      {
        std::lock_guard lock(mutex_);
        if (stopping_ || queue_.empty() || static_cast<int>(active.size()) >= options_.max_batch) break;
        if (!active.empty() && !engine_.has_room_for(queue_.front().request)) break;
        job = std::move(queue_.front());
        queue_.pop_front();
        running_.emplace_back(job.id, job.cancelled);
      }
      // The token callback checks the cancel flag first, so cancel() stops a request at its next token.
      auto flag = job.cancelled;
      TokenCallback user = job.on_token;
      TokenCallback on_token = [flag, user](int32_t token, std::string_view text) {
        if (*flag) return false;
        return user ? user(token, text) : true;
      };
      auto generation = engine_.begin(job.request, std::move(on_token));
      if (!generation) {
        forget(job.id);
        finish(job, generation.status());
        continue;
      }
      active.push_back({std::move(job), std::move(generation).value()});
    }
    if (active.empty()) continue;

    for (auto it = active.begin(); it != active.end();) {
      ActiveGeneration& g = *it->generation;
      Status st = g.prefilling() && !*it->job.cancelled ? engine_.prefill_step(g) : Status::ok();
      if (g.prefilling() && (!st || *it->job.cancelled)) {  // failed, or cancelled before its first token
        forget(it->job.id);
        engine_.abort(g);
        if (st) {
          GenerationResult cancelled = std::move(g.result);
          cancelled.finish_reason = "cancelled";
          finish(it->job, std::move(cancelled));
        } else {
          finish(it->job, st);
        }
        it = active.erase(it);
      } else {
        ++it;
      }
    }
    std::vector<ActiveGeneration*> step;
    for (Running& r : active)
      if (!r.generation->prefilling()) step.push_back(r.generation.get());
    if (step.empty()) continue;
    Status st = engine_.step(step);
    {
      std::lock_guard lock(mutex_);
      ++stats_.decode_steps;
      stats_.decode_step_rows += step.size();
    }
    for (auto it = active.begin(); it != active.end();) {
      if (it->generation->prefilling()) {  // not in this step
        ++it;
        continue;
      }
      if (!st || it->generation->done) {
        forget(it->job.id);
        if (st) {
          GenerationResult r = engine_.end(*it->generation);
          if (*it->job.cancelled) r.finish_reason = "cancelled";
          finish(it->job, std::move(r));
        } else {
          engine_.abort(*it->generation);
          finish(it->job, st);
        }
        it = active.erase(it);
      } else {
        ++it;
      }
    }
  }
}

}  // namespace helium
