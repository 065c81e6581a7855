// tests/engine/engine_fixture.h — an Engine (on the CPU unless asked otherwise) over the embedded default
// model, shared by the engine tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"

namespace helium::testing {

// device "auto": the GPU when there is one (the caller checks on_gpu). pipeline unset: the engine's default
// for the backend (EngineOptions::pipeline).
inline std::unique_ptr<Engine> load_default_engine(int64_t context = 1024, int cache_sequences = 4,
                                                   const std::string& device = "cpu",
                                                   std::optional<bool> pipeline = std::nullopt) {
  EngineOptions options;
  options.device = device;
  options.threads = 2;
  options.context = context;
  options.prompt_cache_sequences = cache_sequences;
  options.pipeline = pipeline;
  auto engine = Engine::load(std::string(HELIUM_SOURCE_DIR) + "/models/helium-code-12m", options);
  EXPECT_TRUE(engine.is_ok()) << engine.error_message();
  return engine ? std::move(engine).value() : nullptr;
}

// Whether the engine runs on the CUDA backend (device "auto" on a machine with a GPU).
inline bool on_gpu(const Engine& engine) { return engine.backend_name().rfind("cuda", 0) == 0; }

inline GenerationRequest greedy_request(const Engine& engine, const std::string& text, int max_new_tokens) {
  GenerationRequest r;
  r.prompt = engine.tokenizer().encode(text, /*add_special_tokens=*/false);
  r.sampling.temperature = 0;
  r.max_new_tokens = max_new_tokens;
  r.ignore_eos = true;
  return r;
}

}  // namespace helium::testing
