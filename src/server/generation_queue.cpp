// server/generation_queue.cpp — see generation_queue.h.
#include "server/generation_queue.h"

namespace helium::server {

bool GenerationChannel::push_token(int32_t token, std::string_view text) {
  {
    std::lock_guard lock(mutex_);
    if (cancelled_) return false;
    text_.append(text);
    if (first_token_ms_ < 0 && token >= 0)
      first_token_ms_ =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - created_).count();
  }
  ready_.notify_one();
  return true;
}

void GenerationChannel::push_done(Result<GenerationResult> result) {
  {
    std::lock_guard lock(mutex_);
    done_.emplace(std::move(result));
  }
  ready_.notify_one();
}

GenerationChannel::Update GenerationChannel::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !text_.empty() || done_.has_value(); });
  Update update;
  update.text.swap(text_);
  if (done_) {
    update.done.emplace(std::move(*done_));
    done_.reset();
  }
  return update;
}

std::optional<Result<GenerationResult>> GenerationChannel::wait_done_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return done_.has_value(); })) return std::nullopt;
  std::optional<Result<GenerationResult>> result(std::move(*done_));
  done_.reset();
  text_.clear();
  return result;
}

void GenerationChannel::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
}

bool GenerationChannel::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

double GenerationChannel::first_token_ms() const {
  std::lock_guard lock(mutex_);
  return first_token_ms_;
}

}  // namespace helium::server
