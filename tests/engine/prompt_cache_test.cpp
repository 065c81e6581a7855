// Prompt cache: a request that extends an earlier conversation resumes from its KV, reports how much it
// reused, and writes exactly the tokens a cold engine writes.
#include <gtest/gtest.h>

#include "engine_fixture.h"

namespace helium {
namespace {

using testing::greedy_request;
using testing::load_default_engine;

TEST(PromptCache, SecondTurnReusesTheFirstAndMatchesAColdRun) {
  auto warm = load_default_engine();
  auto cold = load_default_engine(1024, /*cache_sequences=*/0);
  ASSERT_TRUE(warm && cold);
  GenerationRequest first = greedy_request(*warm, "def fibonacci(n):\n", 24);
  auto r1 = warm->generate(first);
  ASSERT_TRUE(r1) << r1.error_message();
  EXPECT_EQ(r1->cached_tokens, 0);

  // Turn two: the first prompt, its answer, and a new question.
  GenerationRequest second = first;
  second.prompt.insert(second.prompt.end(), r1->tokens.begin(), r1->tokens.end());
  auto more = warm->tokenizer().encode("\n\ndef factorial(n):\n", false);
  second.prompt.insert(second.prompt.end(), more.begin(), more.end());
  auto r2 = warm->generate(second);
  ASSERT_TRUE(r2) << r2.error_message();
  // Everything but the last answer token (sampled, never run through the model) came from the cache.
  EXPECT_EQ(r2->cached_tokens, static_cast<int>(first.prompt.size() + r1->tokens.size() - 1));
  EXPECT_GE(r2->cached_tokens * 10, r2->prompt_tokens * 8);

  auto cold2 = cold->generate(second);
  ASSERT_TRUE(cold2) << cold2.error_message();
  EXPECT_EQ(cold2->cached_tokens, 0);
  EXPECT_EQ(r2->tokens, cold2->tokens);
}

TEST(PromptCache, SampledRepliesAreSeedExactWithAndWithoutTheCache) {
  auto warm = load_default_engine();
  auto cold = load_default_engine(1024, 0);
  ASSERT_TRUE(warm && cold);
  GenerationRequest req = greedy_request(*warm, "import os\nimport sys\n\ndef main():\n", 32);
  req.sampling.temperature = 0.9f;
  req.sampling.top_p = 0.95f;
  req.sampling.seed = 1234;
  ASSERT_TRUE(warm->generate(req));
  auto again = warm->generate(req);  // the same prompt: all but its last token come from the cache
  ASSERT_TRUE(again);
  EXPECT_EQ(again->cached_tokens, static_cast<int>(req.prompt.size()) - 1);
  auto reference = cold->generate(req);
  ASSERT_TRUE(reference);
  EXPECT_EQ(again->tokens, reference->tokens);
}

TEST(PromptCache, UnrelatedPromptsStartCold) {
  auto engine = load_default_engine();
  ASSERT_TRUE(engine);
  auto a = greedy_request(*engine, "class Parser:\n", 8);
  auto b = greedy_request(*engine, "#include <stdio.h>\n", 8);
  ASSERT_NE(a.prompt[0], b.prompt[0]);
  ASSERT_TRUE(engine->generate(a));
  auto rb = engine->generate(b);
  ASSERT_TRUE(rb);
  EXPECT_EQ(rb->cached_tokens, 0);
  EXPECT_EQ(engine->prompt_cache_size(), 2u);
}

TEST(PromptCache, DisabledCacheNeverReuses) {
  auto engine = load_default_engine(1024, 0);
  ASSERT_TRUE(engine);
  auto req = greedy_request(*engine, "def add(a, b):\n", 8);
  ASSERT_TRUE(engine->generate(req));
  auto again = engine->generate(req);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->cached_tokens, 0);
  EXPECT_EQ(engine->prompt_cache_size(), 0u);
}

// A small KV cache under many conversations: cached sequences give way to new requests, nothing fails,
// and the cache never holds more than its limit.
TEST(PromptCache, EvictsLeastRecentlyUsedWhenPagesRunShort) {
  auto engine = load_default_engine(/*context=*/256, /*cache_sequences=*/3);
  auto cold = load_default_engine(256, 0);
  ASSERT_TRUE(engine && cold);
  const char* openings[] = {"def a():\n", "class B:\n", "import re\n", "x = [1, 2, 3]\n", "for i in range(10):\n",
                            "while True:\n", "try:\n", "from typing import List\n"};
  for (int round = 0; round < 2; ++round) {
    for (const char* text : openings) {
      auto req = greedy_request(*engine, text, 120);
      auto r = engine->generate(req);
      ASSERT_TRUE(r) << text << ": " << r.error_message();
      EXPECT_EQ(r->tokens.size(), 120u);
      EXPECT_LE(engine->prompt_cache_size(), 3u);
      auto reference = cold->generate(req);
      ASSERT_TRUE(reference);
      EXPECT_EQ(r->tokens, reference->tokens) << text;
    }
  }
  engine->clear_prompt_cache();
  EXPECT_EQ(engine->prompt_cache_size(), 0u);
  EXPECT_EQ(engine->kv_cache().free_positions(), engine->kv_cache().capacity());
}

}  // namespace
}  // namespace helium
