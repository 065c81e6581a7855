// engine/speed_test.h — `helium bench`: how fast this machine runs a loaded model, beside the ceiling
// its memory bandwidth allows (DESIGN.md's benchmark protocol, through the engine's own generate() as a
// user's request goes): decode tok/s at several contexts, prefill tok/s of one prompt, medians of runs.
// Owns: the protocol and the bytes-per-token rule. Must not: print (progress goes to a callback).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace helium {

// Bytes a decode step reads besides the K/V: every weight once, the embedding table only when it is
// also the output head (tied) — a step reads one row of an untied table.
double weight_bytes_read_per_token(const Checkpoint& checkpoint, const ModelInfo& info);

struct SpeedTestOptions {
  std::vector<int64_t> contexts = {1024, 8192, 32768};  // prompt tokens before the timed decode
  int64_t decode_tokens = 512;                          // generated per run (the first one is prefill's)
  int64_t prefill_tokens = 4096;                        // 0: no prefill test
  int runs = 3;                                         // timed runs per figure, after one warm-up
};

struct DecodeSpeed {
  int64_t context = 0;
  int64_t tokens = 0;
  double tok_s = 0;             // the median run
  std::vector<double> runs_tok_s;
  double ceiling_tok_s = 0;     // bandwidth / (weight bytes + K/V bytes at the run's mean context)
};

struct SpeedTestResult {
  MemoryBandwidth bandwidth;
  double weight_bytes_per_token = 0;
  double kv_bytes_per_position = 0;
  std::vector<DecodeSpeed> decode;
  int64_t prefill_tokens = 0;
  double prefill_tok_s = 0;  // the median run; 0 when not run
  std::vector<double> prefill_runs_tok_s;
};

// The engine's context must hold the largest context plus decode_tokens; its prompt cache should be off
// (each run's prompt is new anyway: pseudo-random ids from the run's own seed). `progress` gets a line
// per measured figure.
Result<SpeedTestResult> run_speed_test(Engine& engine, const SpeedTestOptions& options,
                                       const std::function<void(const std::string&)>& progress = nullptr);

}  // namespace helium
