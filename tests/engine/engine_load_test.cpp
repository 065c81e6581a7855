// tests/engine/engine_load_test.cpp — loading without a tokenizer (EngineOptions::text = false, what
// `helium bench` uses): the embedded model's weights in a dir with no tokenizer.json generate the same ids
// as the full model, with no text; stop strings are refused; and a load that wants text refuses the dir.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "engine_fixture.h"

namespace helium::testing {
namespace {

namespace fs = std::filesystem;

TEST(EngineLoad, WithoutATokenizerGivesTheSameIdsAndNoText) {
  const fs::path model = fs::path(HELIUM_SOURCE_DIR) / "models" / "helium-code-12m";
  const fs::path dir = fs::path(::testing::TempDir()) / ("helium_no_tokenizer_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
    fs::create_symlink(model / f, dir / f);

  auto full = load_default_engine();
  ASSERT_TRUE(full);
  const GenerationRequest request = greedy_request(*full, "def fibonacci(n):", 12);
  auto reference = full->generate(request);
  ASSERT_TRUE(reference.is_ok()) << reference.error_message();
  ASSERT_EQ(reference.value().tokens.size(), 12u);
  EXPECT_FALSE(reference.value().text.empty());

  EngineOptions options;
  options.device = "cpu";
  options.threads = 2;
  options.context = 1024;
  auto refused = Engine::load(dir.string(), options);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.error_message(), dir.string() + " has no tokenizer.json: generating text needs the model's "
                                                    "tokenizer (helium bench runs without one, e.g. on a config "
                                                    "alone with --load-format dummy)");

  options.text = false;
  auto ids_only = Engine::load(dir.string(), options);
  ASSERT_TRUE(ids_only.is_ok()) << ids_only.error_message();
  Engine& e = *ids_only.value();
  EXPECT_FALSE(e.has_tokenizer());
  EXPECT_TRUE(full->has_tokenizer());
  EXPECT_EQ(e.eos_ids(), full->eos_ids());  // from generation_config.json, which names them
  auto ids = e.generate(request);
  ASSERT_TRUE(ids.is_ok()) << ids.error_message();
  EXPECT_EQ(ids.value().tokens, reference.value().tokens);
  EXPECT_EQ(ids.value().text, "");
  EXPECT_EQ(ids.value().finish_reason, "length");

  GenerationRequest with_stop = request;
  with_stop.stop_strings = {"\n"};
  auto stop = e.generate(with_stop);
  ASSERT_FALSE(stop.is_ok());
  EXPECT_EQ(stop.error_message(), "stop strings need the model's tokenizer, and it was loaded without one");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace helium::testing
