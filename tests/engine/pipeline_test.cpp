// Pipelined greedy decode (EngineOptions::pipeline): each step is queued before the previous one's ids
// have come back. Replies, streamed pieces, finish reasons and the KV left for the prompt cache must be
// those of waiting for every id — for every way a generation ends, alone and stepping with others.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine_fixture.h"

namespace helium {
namespace {

// The embedded model at a 512-token context (testing::load_default_engine), pipelined or not.
std::unique_ptr<Engine> load_engine(std::optional<bool> pipeline, int cache_sequences = 4,
                                    const std::string& device = "cpu") {
  return testing::load_default_engine(512, cache_sequences, device, pipeline);
}

struct Reply {
  GenerationResult result;
  std::vector<std::pair<int32_t, std::string>> streamed;
};

// Runs `request` and a follow-up turn that extends its prompt by the reply (reusing its cached KV).
std::pair<Reply, Reply> two_turns(Engine& engine, const GenerationRequest& request, int cancel_after = -1) {
  auto run = [&](const GenerationRequest& r, int cancel) {
    Reply reply;
    auto result = engine.generate(r, [&](int32_t token, std::string_view text) {
      reply.streamed.emplace_back(token, std::string(text));
      return cancel < 0 || static_cast<int>(reply.streamed.size()) < cancel;
    });
    EXPECT_TRUE(result.is_ok()) << result.error_message();
    if (result) reply.result = std::move(result).value();
    return reply;
  };
  Reply first = run(request, cancel_after);
  GenerationRequest next = request;
  next.prompt.insert(next.prompt.end(), first.result.tokens.begin(), first.result.tokens.end());
  const std::vector<int32_t> more = engine.tokenizer().encode("\n# and then", false);
  next.prompt.insert(next.prompt.end(), more.begin(), more.end());
  next.stop_tokens.clear();
  next.stop_strings.clear();
  next.max_new_tokens = 6;
  return {std::move(first), run(next, -1)};
}

void expect_same(const Reply& a, const Reply& b, const std::string& what) {
  EXPECT_EQ(a.result.tokens, b.result.tokens) << what;
  EXPECT_EQ(a.result.text, b.result.text) << what;
  EXPECT_EQ(a.result.finish_reason, b.result.finish_reason) << what;
  EXPECT_EQ(a.result.cached_tokens, b.result.cached_tokens) << what;
  EXPECT_EQ(a.streamed, b.streamed) << what;
}

void expect_every_ending_unpipelined(Engine& queued, Engine& waiting) {
  const GenerationRequest base = testing::greedy_request(waiting, "def fibonacci(n):\n", 24);
  auto [plain, plain_next] = two_turns(waiting, base);
  ASSERT_EQ(plain.result.tokens.size(), 24u);
  ASSERT_GT(plain_next.result.cached_tokens, 0);

  std::vector<std::pair<std::string, GenerationRequest>> cases;
  cases.emplace_back("the token limit", base);
  for (int limit : {1, 2, 3}) {
    GenerationRequest r = base;
    r.max_new_tokens = limit;
    cases.emplace_back("a limit of " + std::to_string(limit), r);
  }
  for (size_t at : {size_t{0}, size_t{1}, size_t{9}}) {  // the reply's token at this index stops it (or an earlier copy)
    GenerationRequest r = base;
    r.stop_tokens = {plain.result.tokens[at]};
    cases.emplace_back("a stop token at " + std::to_string(at), r);
  }
  {
    GenerationRequest r = base;
    r.stop_strings = {plain.result.text.substr(plain.result.text.size() / 2, 3)};
    cases.emplace_back("a stop string", r);
  }
  for (auto& [what, request] : cases) {
    SCOPED_TRACE(what);
    waiting.clear_prompt_cache();
    queued.clear_prompt_cache();
    auto [w1, w2] = two_turns(waiting, request);
    auto [q1, q2] = two_turns(queued, request);
    expect_same(w1, q1, what + ", first turn");
    expect_same(w2, q2, what + ", second turn (the first turn's KV reused)");
  }
  for (int cancel : {1, 2, 5}) {
    SCOPED_TRACE("cancelled after " + std::to_string(cancel));
    waiting.clear_prompt_cache();
    queued.clear_prompt_cache();
    auto [w1, w2] = two_turns(waiting, base, cancel);
    auto [q1, q2] = two_turns(queued, base, cancel);
    EXPECT_EQ(q1.result.finish_reason, "cancelled");
    expect_same(w1, q1, "first turn");
    expect_same(w2, q2, "second turn");
  }
}

TEST(PipelinedDecode, EveryEndingIsTheUnpipelinedOne) {
  auto queued = load_engine(true), waiting = load_engine(false);
  ASSERT_TRUE(queued && waiting);
  expect_every_ending_unpipelined(*queued, *waiting);
}

// The same on the GPU (deferred forwards behind CUDA events, token sources read in recorded graphs);
// skipped without one.
TEST(PipelinedDecode, EveryEndingIsTheUnpipelinedOneOnTheGpu) {
  auto queued = load_engine(true, 4, "auto"), waiting = load_engine(false, 4, "auto");
  ASSERT_TRUE(queued && waiting);
  if (!testing::on_gpu(*queued)) GTEST_SKIP() << "no GPU (backend " << queued->backend_name() << ")";
  expect_every_ending_unpipelined(*queued, *waiting);
}

// Unset, the switch follows the backend: on where ops are queued (CUDA), off on the eager CPU, where a
// queued step gains nothing and a generation's end would cost one forward for nothing.
TEST(PipelinedDecode, OnByDefaultWhereTheBackendQueuesItsWork) {
  auto cpu = load_engine(std::nullopt);
  ASSERT_TRUE(cpu);
  EXPECT_FALSE(cpu->pipelined());
  auto on = load_engine(true);
  ASSERT_TRUE(on);
  EXPECT_TRUE(on->pipelined());
  auto gpu = load_engine(std::nullopt, 4, "auto");
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->pipelined(), testing::on_gpu(*gpu)) << gpu->backend_name();
  auto off = load_engine(false, 4, "auto");
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->pipelined());
}

// Generations stepping together, ending at different steps, one joining after a prefill between steps
// (which the step in flight must survive): each writes what it writes alone, unpipelined.
TEST(PipelinedDecode, GenerationsSteppingTogetherWriteWhatTheyWriteAlone) {
  auto queued = load_engine(true, 0), waiting = load_engine(false, 0);
  ASSERT_TRUE(queued && waiting);
  std::vector<GenerationRequest> requests = {
      testing::greedy_request(*waiting, "import os\n", 5), testing::greedy_request(*waiting, "class Stack:\n", 17),
      testing::greedy_request(*waiting, "# sort a list\n", 11), testing::greedy_request(*waiting, "for i in range(", 9)};
  {
    auto alone = waiting->generate(requests[1]);
    ASSERT_TRUE(alone.is_ok());
    requests[1].stop_tokens = {alone.value().tokens[7]};  // ends on a stop token, not its limit
  }
  std::vector<GenerationResult> expected;
  for (const GenerationRequest& r : requests) {
    auto alone = waiting->generate(r);
    ASSERT_TRUE(alone.is_ok()) << alone.error_message();
    expected.push_back(std::move(alone).value());
  }
  std::vector<std::unique_ptr<ActiveGeneration>> gens;
  std::vector<GenerationResult> got(requests.size());
  auto add = [&](size_t i) {
    auto g = queued->begin(requests[i], nullptr);
    ASSERT_TRUE(g.is_ok()) << g.error_message();
    gens.push_back(std::move(g).value());
  };
  for (size_t i = 0; i < 3; ++i) add(i);
  int steps = 0;
  for (bool busy = true; busy; ++steps) {
    if (steps == 4) add(3);  // joins while the others' step is in flight
    std::vector<ActiveGeneration*> stepping;
    for (auto& g : gens) {
      if (g->seq < 0) continue;
      if (g->prefilling()) {
        ASSERT_TRUE(queued->prefill_step(*g).is_ok());
      }
      if (!g->prefilling()) stepping.push_back(g.get());
    }
    ASSERT_TRUE(queued->step(stepping).is_ok());
    busy = false;
    for (size_t i = 0; i < gens.size(); ++i) {
      if (gens[i]->seq < 0) continue;
      if (gens[i]->done) got[i] = queued->end(*gens[i]);
      else busy = true;
    }
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, expected[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].text, expected[i].text) << "request " << i;
    EXPECT_EQ(got[i].finish_reason, expected[i].finish_reason) << "request " << i;
  }
  EXPECT_EQ(expected[1].finish_reason, "stop");
}

}  // namespace
}  // namespace helium
