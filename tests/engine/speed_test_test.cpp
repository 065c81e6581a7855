// tests/engine/speed_test_test.cpp — engine/speed_test (what `helium bench` runs): the figures it reports
// are consistent with each other and with the bytes a token reads, on the CPU and (skipped without one)
// on the GPU, where it also checks the CUDA bandwidth measurement; and it refuses settings it cannot run.
// No speed is asserted: speed lives in the benchmarks.
#include <gtest/gtest.h>

#include "engine/speed_test.h"
#include "engine_fixture.h"

namespace helium {
namespace {

void expect_consistent_figures(Engine& engine) {
  SpeedTestOptions o;
  o.contexts = {16, 200};
  o.decode_tokens = 5;
  o.prefill_tokens = 64;
  o.runs = 2;
  int lines = 0;
  auto r = run_speed_test(engine, o, [&](const std::string&) { ++lines; });
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  EXPECT_EQ(lines, 3);  // one per decode context, one for the prefill
  EXPECT_GT(r->bandwidth.bytes_per_second, 1e9) << r->bandwidth.method;
  EXPECT_FALSE(r->bandwidth.method.empty());
  // The embedded model: tied embeddings, so every weight is read once a token; K/V of 6 layers x 128 wide.
  EXPECT_DOUBLE_EQ(r->weight_bytes_per_token, static_cast<double>(engine.model().info().weight_bytes));
  const double kv_element = testing::on_gpu(engine) ? 2 : 4;  // BF16 on CUDA, F32 on the CPU
  EXPECT_DOUBLE_EQ(r->kv_bytes_per_position, 6 * 2 * 128 * kv_element);
  ASSERT_EQ(r->decode.size(), 2u);
  for (const DecodeSpeed& d : r->decode) {
    ASSERT_EQ(d.runs_tok_s.size(), 2u);
    EXPECT_GT(d.tok_s, 0);
    const double mean_context = static_cast<double>(d.context) + 2.5;
    EXPECT_DOUBLE_EQ(d.ceiling_tok_s, r->bandwidth.bytes_per_second /
                                          (r->weight_bytes_per_token + r->kv_bytes_per_position * mean_context));
  }
  EXPECT_EQ(r->prefill_tokens, 64);
  EXPECT_GT(r->prefill_tok_s, 0);
}

TEST(SpeedTest, FiguresAgreeWithTheBytesReadOnTheCpu) {
  auto engine = testing::load_default_engine(512, 0);
  ASSERT_TRUE(engine);
  expect_consistent_figures(*engine);
}

TEST(SpeedTest, FiguresAgreeWithTheBytesReadOnTheGpu) {
  auto engine = testing::load_default_engine(512, 0, "auto");
  ASSERT_TRUE(engine);
  if (!testing::on_gpu(*engine)) GTEST_SKIP() << "no GPU (backend " << engine->backend_name() << ")";
  expect_consistent_figures(*engine);
}

TEST(SpeedTest, RefusesWhatItCannotRun) {
  auto engine = testing::load_default_engine(128, 0);
  ASSERT_TRUE(engine);
  SpeedTestOptions o;
  o.contexts = {100};
  o.decode_tokens = 64;  // 164 positions in a context of 128
  o.prefill_tokens = 0;
  auto too_long = run_speed_test(*engine, o);
  ASSERT_FALSE(too_long.is_ok());
  EXPECT_NE(too_long.error_message().find("the engine's context (128 tokens) cannot hold 164 tokens"), std::string::npos)
      << too_long.error_message();
  o.contexts = {16};
  o.decode_tokens = 1;
  EXPECT_FALSE(run_speed_test(*engine, o).is_ok());
  o.decode_tokens = 4;
  o.contexts = {};
  EXPECT_FALSE(run_speed_test(*engine, o).is_ok());
}

}  // namespace
}  // namespace helium
