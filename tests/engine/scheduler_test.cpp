// Scheduler: requests from many threads all finish with the tokens they would get alone; cancellation,
// refusals and shutdown each end a request exactly once.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <latch>
#include <map>
#include <thread>

#include "engine_fixture.h"

namespace helium {
namespace {

using testing::greedy_request;
using testing::load_default_engine;

// Collects one request's outcome; waits for on_done.
struct Outcome {
  std::promise<Result<GenerationResult>> done;
  std::vector<int32_t> streamed;
  std::string text;
  DoneCallback done_callback() {
    return [this](Result<GenerationResult> r) { done.set_value(std::move(r)); };
  }
  TokenCallback token_callback() {
    return [this](int32_t token, std::string_view t) {
      if (token >= 0) streamed.push_back(token);
      text += t;
      return true;
    };
  }
};

TEST(Scheduler, ConcurrentRequestsEachGetTheirOwnTokens) {
  auto engine = load_default_engine();
  auto reference = load_default_engine(1024, 0);
  ASSERT_TRUE(engine && reference);
  Scheduler scheduler(*engine);
  const std::vector<std::string> prompts = {"def parse(s):\n", "class Stack:\n", "import json\n", "def main():\n",
                                            "for k, v in d.items():\n", "#include <vector>\n"};
  std::vector<Outcome> outcomes(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      GenerationRequest req = greedy_request(*engine, prompts[i], 16);
      req.sampling.temperature = 0.8f;
      req.sampling.seed = 100 + i;
      auto id = scheduler.submit(req, outcomes[i].token_callback(), outcomes[i].done_callback());
      ASSERT_TRUE(id) << id.error_message();
    });
  }
  for (auto& c : clients) c.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto r = outcomes[i].done.get_future().get();
    ASSERT_TRUE(r) << r.error_message();
    GenerationRequest req = greedy_request(*engine, prompts[i], 16);
    req.sampling.temperature = 0.8f;
    req.sampling.seed = 100 + i;
    auto alone = reference->generate(req);
    ASSERT_TRUE(alone);
    EXPECT_EQ(r->tokens, alone->tokens) << prompts[i];
    EXPECT_EQ(outcomes[i].streamed, alone->tokens) << prompts[i];
    EXPECT_EQ(outcomes[i].text, alone->text) << prompts[i];
  }
  auto stats = scheduler.stats();
  EXPECT_EQ(stats.requests_submitted, prompts.size());
  EXPECT_EQ(stats.requests_completed, prompts.size());
  EXPECT_EQ(stats.generated_tokens, 16 * prompts.size());
  EXPECT_EQ(stats.queue_depth, 0u);
}

// Requests waiting while the engine is busy are admitted together and decode in shared forwards, each
// writing exactly the tokens it writes alone (batch invariance carries to whole replies).
TEST(Scheduler, WaitingRequestsDecodeTogetherWithTheirOwnTokens) {
  auto engine = load_default_engine();
  auto reference = load_default_engine(1024, 0);
  ASSERT_TRUE(engine && reference);
  Scheduler scheduler(*engine);
  std::latch entered(1), release(1);
  bool first = true;
  auto hold = [&](int32_t, std::string_view) {
    if (first) {
      first = false;
      entered.count_down();
      release.wait();
    }
    return true;
  };
  const std::vector<std::string> prompts = {"def walk(tree):\n", "class Queue:\n", "import argparse\n",
                                            "def merge(a, b):\n", "x = {'a': 1}\n"};
  std::vector<Outcome> outcomes(prompts.size());
  auto request = [&](size_t i) {
    GenerationRequest req = greedy_request(*engine, prompts[i], 24 + 4 * static_cast<int>(i));
    req.sampling.temperature = 0.7f;
    req.sampling.seed = 7 + i;
    return req;
  };
  ASSERT_TRUE(scheduler.submit(request(0), hold, outcomes[0].done_callback()));
  entered.wait();
  for (size_t i = 1; i < prompts.size(); ++i)
    ASSERT_TRUE(scheduler.submit(request(i), outcomes[i].token_callback(), outcomes[i].done_callback()));
  release.count_down();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto r = outcomes[i].done.get_future().get();
    ASSERT_TRUE(r) << r.error_message();
    auto alone = reference->generate(request(i));
    ASSERT_TRUE(alone);
    EXPECT_EQ(r->tokens, alone->tokens) << prompts[i];
  }
  const SchedulerStats stats = scheduler.stats();
  EXPECT_GT(stats.decode_step_rows, stats.decode_steps) << "no step carried more than one generation";
  EXPECT_EQ(stats.running, 0u);
}

// When the KV cache cannot hold two requests at once, the second waits for the first and then runs.
TEST(Scheduler, RequestWaitsForKvRoomInsteadOfFailing) {
  auto engine = load_default_engine(/*context=*/256, /*cache_sequences=*/0);
  ASSERT_TRUE(engine);
  Scheduler scheduler(*engine);
  std::vector<Outcome> outcomes(3);
  for (size_t i = 0; i < outcomes.size(); ++i)
    ASSERT_TRUE(scheduler.submit(greedy_request(*engine, i == 1 ? "class A:\n" : "def f(x):\n", 180),
                                 outcomes[i].token_callback(), outcomes[i].done_callback()));
  for (auto& o : outcomes) {
    auto r = o.done.get_future().get();
    ASSERT_TRUE(r) << r.error_message();
    EXPECT_EQ(r->tokens.size(), 180u);
  }
  EXPECT_EQ(scheduler.stats().decode_step_rows, scheduler.stats().decode_steps) << "they could not have shared steps";
}

TEST(Scheduler, RefusesWhatCannotFitOrWait) {
  auto engine = load_default_engine(/*context=*/64);
  ASSERT_TRUE(engine);
  SchedulerOptions options;
  options.max_queued = 1;
  Scheduler scheduler(*engine, options);

  GenerationRequest too_long;
  too_long.prompt.assign(64, 1);
  auto refused = scheduler.submit(too_long, nullptr, [](Result<GenerationResult>) { FAIL() << "no callback"; });
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error_message().find("64 tokens"), std::string::npos) << refused.error_message();

  // Hold the engine thread inside the first request while the queue fills.
  std::latch entered(1), release(1);
  bool first_token = true;
  Outcome running, queued;
  auto blocker = [&](int32_t, std::string_view) {
    if (first_token) {
      first_token = false;
      entered.count_down();
      release.wait();
    }
    return true;
  };
  ASSERT_TRUE(scheduler.submit(greedy_request(*engine, "def f():\n", 4), blocker, running.done_callback()));
  entered.wait();
  ASSERT_TRUE(scheduler.submit(greedy_request(*engine, "def g():\n", 4), nullptr, queued.done_callback()));
  auto full = scheduler.submit(greedy_request(*engine, "def h():\n", 4), nullptr, nullptr);
  ASSERT_FALSE(full);
  EXPECT_NE(full.error_message().find("queue is full"), std::string::npos) << full.error_message();
  EXPECT_EQ(scheduler.stats().queue_depth, 1u);
  EXPECT_EQ(scheduler.stats().running, 1u);
  release.count_down();
  EXPECT_TRUE(running.done.get_future().get());
  EXPECT_TRUE(queued.done.get_future().get());
  EXPECT_EQ(scheduler.stats().requests_refused, 2u);
}

TEST(Scheduler, CancelsQueuedAndRunningRequests) {
  auto engine = load_default_engine();
  ASSERT_TRUE(engine);
  Scheduler scheduler(*engine);
  std::latch entered(1), release(1);
  std::atomic<int> tokens_after_cancel{0};
  std::atomic<bool> cancelled{false};
  bool first = true;
  Outcome running, queued;
  auto slow = [&](int32_t, std::string_view) {
    if (first) {
      first = false;
      entered.count_down();
      release.wait();
      return true;  // the token in flight when cancel() came
    }
    if (cancelled) ++tokens_after_cancel;
    return true;
  };
  auto running_id = scheduler.submit(greedy_request(*engine, "def f():\n", 200), slow, running.done_callback());
  ASSERT_TRUE(running_id);
  entered.wait();
  auto queued_id = scheduler.submit(greedy_request(*engine, "def g():\n", 200), nullptr, queued.done_callback());
  ASSERT_TRUE(queued_id);
  scheduler.cancel(*queued_id);
  auto q = queued.done.get_future().get();
  ASSERT_TRUE(q);
  EXPECT_EQ(q->finish_reason, "cancelled");
  EXPECT_TRUE(q->tokens.empty());

  scheduler.cancel(*running_id);
  cancelled = true;
  release.count_down();
  auto r = running.done.get_future().get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->finish_reason, "cancelled");
  EXPECT_LT(r->tokens.size(), 200u);
  EXPECT_EQ(tokens_after_cancel.load(), 0);

  scheduler.cancel(12345);  // unknown: ignored
  Outcome after;
  ASSERT_TRUE(scheduler.submit(greedy_request(*engine, "x = 1\n", 4), nullptr, after.done_callback()));
  auto a = after.done.get_future().get();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->tokens.size(), 4u);
}

// A prompt of many chunks is prefilled a chunk per loop, between the running generations' decode steps: the
// one already decoding keeps writing tokens while the long prompt is prefilled (before, the whole prefill
// ran at admission and it stalled), and both still write the tokens they write alone. A request cancelled
// while its prompt is prefilled stops there.
TEST(Scheduler, ALongPromptIsPrefilledBetweenTheOthersDecodeSteps) {
  auto engine = load_default_engine(4096, 0);
  auto reference = load_default_engine(4096, 0);
  ASSERT_TRUE(engine && reference);
  std::string text;
  GenerationRequest long_request;
  while ((long_request = greedy_request(*engine, text, 4)).prompt.size() < 2000)
    text += "for i in range(len(values)):\n    total += values[i] * weights[i]\n";
  const size_t chunks = (long_request.prompt.size() + 255) / 256;  // 256 rows a forward on the CPU
  ASSERT_GE(chunks, 8u);

  Scheduler scheduler(*engine);
  std::mutex mutex;
  std::string events;  // 'a': a token of the running request; 'S': the long one submitted; 'b': a token of it
  std::promise<void> decoding;
  int a_tokens = 0;
  Outcome running, long_one;
  const GenerationRequest running_request = greedy_request(*engine, "def main():\n", 400);
  ASSERT_TRUE(scheduler.submit(
      running_request,
      [&](int32_t token, std::string_view) {
        if (token < 0) return true;
        std::lock_guard lock(mutex);
        events += 'a';
        if (++a_tokens == 3) decoding.set_value();
        return true;
      },
      running.done_callback()));
  decoding.get_future().wait();
  {
    std::lock_guard lock(mutex);
    events += 'S';
  }
  ASSERT_TRUE(scheduler.submit(
      long_request,
      [&](int32_t token, std::string_view) {
        if (token < 0) return true;
        std::lock_guard lock(mutex);
        events += 'b';
        return true;
      },
      long_one.done_callback()));
  auto b = long_one.done.get_future().get();
  auto a = running.done.get_future().get();
  ASSERT_TRUE(a && b);
  const size_t submitted = events.find('S'), first_b = events.find('b');
  ASSERT_NE(first_b, std::string::npos);
  const auto during = std::count(events.begin() + static_cast<std::ptrdiff_t>(submitted),
                                 events.begin() + static_cast<std::ptrdiff_t>(first_b), 'a');
  // One decode step after each chunk but the last (which joins the step that draws the first token); at
  // most two more from before the long request was admitted.
  EXPECT_GE(static_cast<size_t>(during), chunks - 1) << events;
  EXPECT_LE(static_cast<size_t>(during), chunks + 2) << events;
  auto alone_a = reference->generate(running_request);
  auto alone_b = reference->generate(long_request);
  ASSERT_TRUE(alone_a && alone_b);
  EXPECT_EQ(a->tokens, alone_a->tokens);
  EXPECT_EQ(b->tokens, alone_b->tokens);

  // Cancelled while prefilling: ended at its next chunk, no token, its KV freed (the same request then fits).
  Outcome cancelled;
  std::atomic<bool> got_token{false};
  auto id = scheduler.submit(
      long_request, [&](int32_t token, std::string_view) { return token < 0 || !(got_token = true); },
      cancelled.done_callback());
  ASSERT_TRUE(id);
  scheduler.cancel(*id);
  auto c = cancelled.done.get_future().get();
  ASSERT_TRUE(c) << c.error_message();
  EXPECT_EQ(c->finish_reason, "cancelled");
  EXPECT_TRUE(c->tokens.empty());
  EXPECT_FALSE(got_token.load());
  Outcome again;
  ASSERT_TRUE(scheduler.submit(long_request, nullptr, again.done_callback()));
  auto g = again.done.get_future().get();
  ASSERT_TRUE(g) << g.error_message();
  EXPECT_EQ(g->tokens, alone_b->tokens);
}

TEST(Scheduler, ShutdownEndsEveryRequestOnceAndRefusesNewOnes) {
  auto engine = load_default_engine();
  ASSERT_TRUE(engine);
  Scheduler scheduler(*engine);
  std::latch entered(1);
  bool first = true;
  auto signal = [&](int32_t, std::string_view) {
    if (first) {
      first = false;
      entered.count_down();
    }
    return true;
  };
  std::vector<Outcome> outcomes(4);
  ASSERT_TRUE(scheduler.submit(greedy_request(*engine, "def f():\n", 500), signal, outcomes[0].done_callback()));
  entered.wait();
  for (size_t i = 1; i < outcomes.size(); ++i)
    ASSERT_TRUE(scheduler.submit(greedy_request(*engine, "def g():\n", 500), nullptr, outcomes[i].done_callback()));
  scheduler.shutdown();
  for (auto& o : outcomes) {
    auto r = o.done.get_future().get();  // a second set_value would throw: each ends once
    ASSERT_TRUE(r);
    EXPECT_EQ(r->finish_reason, "cancelled");
  }
  EXPECT_FALSE(scheduler.submit(greedy_request(*engine, "x\n", 1), nullptr, nullptr));
}

}  // namespace
}  // namespace helium
