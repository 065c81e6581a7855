// engine/engine.h — the one owner of device work: a loaded model, its KV cache and tokenizer, and the
// generation loop (prefill in chunks, then decode; sample; stop; stream text).
// Owns: the backend instance, model, KV cache, the request's sequence lifetime. Must not: parse HTTP or
// CLI arguments (callers hand it requests), or reach into kernels.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_cache.h"
#include "loader/checkpoint.h"
#include "models/model.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace helium {

struct EngineOptions {
  std::string device = "auto";  // "cpu", "cuda", or "auto" (cuda when a GPU is present)
  int threads = 0;              // CPU threads; 0 = all
  int64_t context = 0;          // KV positions; 0 = the model's max_position_embeddings, capped at 32768
  int max_rows = 0;             // rows per forward (prefill chunk); 0: 256 on the CPU, 4096 on CUDA
  std::optional<DType> kv_dtype;  // default: F32 on the CPU (exact), BF16 on CUDA
  LoadFormat load_format = LoadFormat::Weights;
  bool retune_kernels = false;  // re-time kernel configurations rather than use the device's cache
  // Finished sequences whose KV is kept for reuse by later requests that share a prefix with them (the
  // prompt cache); 0 turns it off. They are evicted, least recently used first, when KV pages run short.
  int prompt_cache_sequences = 4;
  // Whether generations need text. False (benchmarks): a model dir without tokenizer.json loads too (a
  // config alone with LoadFormat::Dummy); its generations give token ids and no text, and stop strings are
  // refused. With a tokenizer present it is loaded either way.
  bool text = true;
  // Plain greedy decode queues each step before the previous one's ids have come back: the step reads
  // its token where the previous step's argmax was taken (Batch::token_sources), so the device does not
  // wait on the host between steps. Tokens, texts and the KV left behind are those of unpipelined decode
  // (a row queued for a generation that then stops is undone). Unset: on where the backend queues its work
  // (Backend::queues_work: CUDA), off on the CPU, whose eager backend gains nothing from it and would run
  // one forward for nothing at each generation's end. `helium_bench_decode --pipeline 1` times the same loop
  // (docs/benchmarks.md, thirty-seventh session: the same tokens on an H100, +0.1% at 1K in that loop).
  std::optional<bool> pipeline;
};

// KV positions for a model: `requested` when positive, else its max_position_embeddings capped at 32768.
int64_t context_for(const Checkpoint& checkpoint, int64_t requested);

// The device "auto" stands for on this machine (CUDA when this build has it and a GPU is present, else
// the CPU); other names are returned as they are.
std::string resolve_device(const std::string& requested);

// The devices this build can run on, e.g. {"cpu", "cuda"}; "cuda" only when built with CUDA.
std::vector<std::string> available_devices();

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int max_new_tokens = 256;
  bool ignore_eos = false;               // keep going past end-of-sequence tokens (benchmarks)
  std::vector<int32_t> stop_tokens;      // in addition to the model's end-of-sequence ids
  std::vector<std::string> stop_strings;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids (the stop token excluded)
  std::string text;             // generated text, cut before a stop string
  std::string finish_reason;    // "stop" (eos / stop token / stop string), "length", "cancelled"
  int prompt_tokens = 0;
  int cached_tokens = 0;        // prompt tokens whose KV was reused from the prompt cache, not recomputed
  double prefill_seconds = 0;   // to the first sampled token's logits (the time to first token)
  double decode_seconds = 0;    // from the first sampled token to the last
};

// Called with each new token and the text it made final (may be empty), and once at the end with token
// -1 for text held back until then; return false to cancel.
using TokenCallback = std::function<bool(int32_t token, std::string_view text)>;

// A request in flight (Engine::begin .. Engine::end): its sequence, the logits its next token is drawn
// from, and its streaming state. Owned by the caller; several may step together.
struct ActiveGeneration {
  GenerationRequest request;
  TokenCallback on_token;
  int32_t seq = -1;
  int64_t prefilled = 0;                // prompt positions in the KV cache so far (Engine::prefill_step)
  int64_t limit = 0;                    // tokens it may still write at most, from the start
  int64_t generated = 0;                // tokens sampled so far
  std::vector<int32_t> context_tokens;  // prompt + output
  std::vector<int32_t> stops;           // stop token ids (eos unless ignored, + the request's)
  std::vector<float> logits;            // (vocab) of the last position run
  // The next token when it was drawn where the logits are, which then were not copied: the device's
  // argmax (plain greedy) or the draw from the candidates it selected (plain sampling); -1: sample from
  // `logits`.
  int32_t device_token = -1;
  bool in_flight = false;  // its next token is being computed by a step queued before it (Engine::step)
  std::unique_ptr<IncrementalDetokenizer> detok;
  std::unique_ptr<StopStrings> stop_strings;
  size_t emitted = 0;                   // bytes of stop_strings->text() handed to on_token
  SamplerScratch scratch;
  GenerationResult result;
  bool done = false;
  std::chrono::steady_clock::time_point decode_start;
  bool prefilling() const { return prefilled < static_cast<int64_t>(request.prompt.size()); }
};

class Engine {
 public:
  // Loads the checkpoint directory (config, weights, tokenizer) onto the chosen device.
  static Result<std::unique_ptr<Engine>> load(const std::string& model_dir, const EngineOptions& options);
  ~Engine();

  // Loads the model's weights onto the device with retune_kernels set (the `helium tune` command) and
  // returns the device name; the tuning cache is rewritten as a side effect.
  static Result<std::string> tune(const std::string& model_dir, EngineOptions options);

  // Runs one request to its end on the calling thread. A prompt that shares a prefix with a sequence in
  // the prompt cache resumes from it: only the rest of the prompt is prefilled (cached_tokens says how
  // many were reused). Reused KV entries were written by whichever path computed them first (prefill or
  // decode); on a backend whose prefill and decode paths round differently, a cached run may differ from
  // a cold one in the last bits of its logits.
  Result<GenerationResult> generate(const GenerationRequest& request, const TokenCallback& on_token = nullptr);

  // The same, in pieces, for a caller that runs several requests at once (the Scheduler): begin() checks
  // the request, takes its prompt-cache prefix and reserves KV room for everything it may write;
  // prefill_step() runs the next chunk of its prompt (the model's rows per forward: the chunks generate()
  // uses, so the same bits) until prefilling() is false, so that a caller can decode other generations
  // between the chunks of a long prompt; step() samples one token for each unfinished, prefilled
  // generation (it skips the others) and runs all that continue through ONE forward (a row each: rows are
  // bitwise what they would be alone, so every request writes the tokens it would write by itself); end()
  // finishes one (flushes held-back text, keeps its sequence in the prompt cache) and abort() drops one.
  // A prefill_step or step error leaves the generations it touched to abort().
  Result<std::unique_ptr<ActiveGeneration>> begin(const GenerationRequest& request, TokenCallback on_token);
  Status prefill_step(ActiveGeneration& generation);
  Status step(std::span<ActiveGeneration* const> generations);
  GenerationResult end(ActiveGeneration& generation);
  void abort(ActiveGeneration& generation);
  // Whether begin() would find KV room for this request now (counting cached sequences it may evict).
  bool has_room_for(const GenerationRequest& request) const;
  // Rows one step() can take (the model's logit rows).
  int max_batch() const;

  // Drops every cached sequence (frees its KV pages).
  void clear_prompt_cache();
  size_t prompt_cache_size() const { return prompt_cache_.size(); }

  const Model& model() const { return *model_; }
  // The model's tokenizer; absent only when loaded with EngineOptions::text = false from a dir without one.
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  std::shared_ptr<const Tokenizer> tokenizer_ptr() const { return tokenizer_; }
  const Checkpoint& checkpoint() const { return checkpoint_; }
  const KvCache& kv_cache() const { return *kv_; }
  int64_t context() const { return kv_->capacity(); }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  std::string backend_name() const { return backend_->name(); }
  // Whether plain greedy steps are queued one ahead (EngineOptions::pipeline, or its default for the backend).
  bool pipelined() const { return pipeline_; }
  // The device's memory bandwidth (Backend::measure_memory_bandwidth); not during a generation.
  Result<MemoryBandwidth> measure_memory_bandwidth() { return backend_->measure_memory_bandwidth(); }

 private:
  Engine() = default;
  // Runs prompt positions [start, start + the model's rows) of seq (fewer at the end); the chunk that ends
  // the prompt writes its last position's logits. Returns where the next chunk starts.
  Result<size_t> prefill_chunk(int32_t seq, std::span<const int32_t> prompt, size_t start, std::vector<float>& logits);

  // A finished sequence kept for reuse: its KV holds `tokens` at positions [0, tokens.size()).
  struct CachedSequence {
    int32_t seq = -1;
    std::vector<int32_t> tokens;
    uint64_t last_used = 0;
  };
  // Takes the cached sequence sharing the longest prefix with `prompt` out of the cache, trimmed to at
  // most prompt.size() - 1 positions (the last prompt token is always run, for its logits); returns
  // nullopt when none shares a token.
  std::optional<CachedSequence> take_cached_prefix(std::span<const int32_t> prompt);
  // Frees least recently used cached sequences until `positions` KV positions are free, or none is left.
  void evict_cached_until_free(int64_t positions);
  void keep_in_cache(int32_t seq, std::vector<int32_t> tokens);
  // KV positions a request reserves beyond what its cached prefix already holds (whole pages).
  int64_t positions_needed(int64_t prompt_len, int64_t limit, int64_t reused) const;
  // Samples g's next token and streams it; false when g is finished.
  bool sample_next(ActiveGeneration& g);
  // Every model forward goes through here (counted: a queued step's ids may only feed the next forward).
  Status run_forward(const Batch& batch, const ForwardOutputs& out);
  // A plain greedy step with the steps queued ahead (EngineOptions::pipeline): queues the next rows of the
  // generations in flight (their tokens read on the device) and of those whose token is known, then takes
  // the ids of the step before and samples them, undoing the queued row of a generation that stopped.
  Status pipelined_step(std::span<ActiveGeneration* const> generations);
  // Waits for the step in flight and hands its ids to its generations as device tokens (the state an
  // unpipelined step leaves); returns its rows (null: undone), none when no step was in flight.
  Result<std::vector<ActiveGeneration*>> land_flight();
  // land_flight(), its rows not needed.
  Status settle();
  // A step of `rows` generations fits one forward (max_batch), or the error that says it does not.
  Status fits_one_forward(size_t rows) const;
  // philox_uniform(seed, position) for g's next token: plain decoding's random number, wherever it is drawn.
  static double next_uniform(const ActiveGeneration& g);
  std::vector<float> step_logits_;  // (rows, vocab) of one step
  std::vector<int32_t> step_argmax_;  // (rows) of one step whose generations are all plain greedy
  // One step whose generations all sample on raw logits from the device's candidates (CandidateOutputs).
  std::vector<float> step_temperature_, step_x_;
  std::vector<int32_t> step_top_k_, step_ids_, step_count_, step_valid_;
  std::vector<double> step_total_;
  // The greedy step in flight (pipelined_step): its rows' generations (null: a row undone after its
  // generation stopped), the buffer its ids land in, and the forward it was.
  struct Flight {
    std::vector<ActiveGeneration*> rows;
    int buffer = 0;
    uint64_t forward = 0;
  };
  std::optional<Flight> flight_;
  std::array<std::vector<int32_t>, 2> flight_ids_;  // a step's ids and the next's, alternately
  uint64_t forwards_ = 0;
  bool pipeline_ = false;  // EngineOptions::pipeline

  Checkpoint checkpoint_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCache> kv_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<int32_t> eos_ids_;
  int prompt_cache_limit_ = 0;
  std::vector<CachedSequence> prompt_cache_;
  uint64_t cache_clock_ = 0;
};

}  // namespace helium
