#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "backend/cpu/cpu_backend.h"
#if HELIUM_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "models/config_reader.h"
#include "sample/philox.h"

namespace helium {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Frees a sequence's KV slots when a request ends with an error; release() hands the sequence on.
struct SequenceGuard {
  KvCache& kv;
  int32_t seq;
  bool owned = true;
  void release() { owned = false; }
  ~SequenceGuard() {
    if (owned) kv.free_sequence(seq);
  }
};

}  // namespace

Engine::~Engine() = default;

std::vector<std::string> available_devices() {
#if HELIUM_HAVE_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::string resolve_device(const std::string& requested) {
  if (requested != "auto") return requested;
#if HELIUM_HAVE_CUDA
  return cuda_device_count() > 0 ? "cuda" : "cpu";
#else
  return "cpu";
#endif
}

namespace {

// The backend for options.device ("auto": CUDA when this build has it and a GPU is present), with the
// rows per forward its model is planned for: large prefill chunks keep the GPU's GEMMs efficient (a 4K
// prompt in one chunk ran at 29.2K tok/s on the H200 against 26.9K in 1K chunks, docs/benchmarks.md); the
// CPU gains nothing past 256.
struct DeviceChoice {
  std::unique_ptr<Backend> backend;
  bool cpu = true;
  int rows_per_forward = 0;
};

// The model's attention and matmul sizes that the CUDA backend's scratch is planned for (read from the
// config before the model exists); a key the config lacks keeps the backend's generous default.
struct ScratchShape {
  int heads = 0, head_dim = 0;
  int64_t max_k = 0;
};

ScratchShape scratch_shape_of(const Checkpoint& ckpt) {
  ConfigReader r(ckpt.config, ckpt.dir + "/config.json");
  ScratchShape s;
  const int64_t hidden = r.integer_or("hidden_size", 0), heads = r.integer_or("num_attention_heads", 0);
  s.heads = static_cast<int>(heads);
  s.head_dim = static_cast<int>(r.integer_or("head_dim", heads > 0 ? hidden / heads : 0));
  s.max_k = std::max({hidden, r.integer_or("intermediate_size", 0), heads * s.head_dim});
  return s;
}

// The KV cache's element type: the caller's, else F32 on the CPU and BF16 on a GPU.
DType kv_dtype_for(const EngineOptions& options, const DeviceChoice& device) {
  return options.kv_dtype.value_or(device.cpu ? DType::F32 : DType::BF16);
}

Result<DeviceChoice> make_backend(const EngineOptions& options, int64_t context, [[maybe_unused]] const ScratchShape& shape) {
  auto rows_for = [&](bool cuda) {
    if (options.max_rows > 0) return options.max_rows;
    return static_cast<int>(std::min<int64_t>(cuda ? 4096 : 256, std::max<int64_t>(context, 1)));
  };
  const std::string device = resolve_device(options.device);
#if HELIUM_HAVE_CUDA
  if (device == "cuda") {
    CudaBackendOptions co;
    co.max_rows = rows_for(true);
    co.max_context = context;
    if (shape.heads > 0 && shape.head_dim > 0) {
      co.max_heads = shape.heads;
      co.max_head_dim = shape.head_dim;
    }
    if (shape.max_k > 0) co.max_k = shape.max_k;
    HELIUM_ASSIGN_OR_RETURN(auto cuda, CudaBackend::create(co));
    return DeviceChoice{std::move(cuda), false, co.max_rows};
  }
#endif
  if (device == "cpu") {
    HELIUM_ASSIGN_OR_RETURN(auto cpu, CpuBackend::create(options.threads));
    return DeviceChoice{std::move(cpu), true, rows_for(false)};
  }
  std::string list;
  for (const auto& d : available_devices()) list += (list.empty() ? "" : ", ") + d;
  return Status::error("device '" + options.device + "' is not available in this build (available: " + list + ")");
}

}  // namespace

int64_t context_for(const Checkpoint& ckpt, int64_t requested) {
  if (requested > 0) return requested;
  ConfigReader r(ckpt.config, ckpt.dir + "/config.json");
  return std::min<int64_t>(r.integer_or("max_position_embeddings", 4096), 32768);
}

Result<std::string> Engine::tune(const std::string& model_dir, EngineOptions options) {
  HELIUM_ASSIGN_OR_RETURN(Checkpoint ckpt, load_checkpoint(model_dir, options.load_format));
  const int64_t context = context_for(ckpt, options.context);
  HELIUM_ASSIGN_OR_RETURN(DeviceChoice device, make_backend(options, context, scratch_shape_of(ckpt)));
  ModelOptions mo;
  mo.max_rows = device.rows_per_forward;
  mo.max_context = context;
  mo.retune_kernels = true;
  mo.kv_dtype = kv_dtype_for(options, device);
  HELIUM_ASSIGN_OR_RETURN(auto model, load_model(ckpt, *device.backend, mo));
  return device.backend->name();
}

Result<std::unique_ptr<Engine>> Engine::load(const std::string& model_dir, const EngineOptions& options) {
  std::unique_ptr<Engine> e(new Engine());
  HELIUM_ASSIGN_OR_RETURN(e->checkpoint_, load_checkpoint(model_dir, options.load_format));
  if (std::filesystem::exists(std::filesystem::path(model_dir) / "tokenizer.json")) {
    HELIUM_ASSIGN_OR_RETURN(e->tokenizer_, Tokenizer::from_dir(model_dir));
  } else if (options.text) {
    return Status::error(model_dir + " has no tokenizer.json: generating text needs the model's tokenizer (helium bench "
                         "runs without one, e.g. on a config alone with --load-format dummy)");
  }
  const int64_t context = context_for(e->checkpoint_, options.context);
  HELIUM_ASSIGN_OR_RETURN(DeviceChoice device, make_backend(options, context, scratch_shape_of(e->checkpoint_)));
  e->backend_ = std::move(device.backend);
  const DType kv_dtype = kv_dtype_for(options, device);
  ModelOptions mo;
  mo.max_rows = device.rows_per_forward;
  mo.max_context = context;
  mo.retune_kernels = options.retune_kernels;
  mo.kv_dtype = kv_dtype;
  HELIUM_ASSIGN_OR_RETURN(e->model_, load_model(e->checkpoint_, *e->backend_, mo));
  HELIUM_ASSIGN_OR_RETURN(e->kv_, KvCache::create(*e->backend_, e->model_->kv_spec(), context, kv_dtype, mo.kv_page_size));
  e->prompt_cache_limit_ = std::max(options.prompt_cache_sequences, 0);
  e->pipeline_ = options.pipeline.value_or(e->backend_->queues_work());
  for (auto& ids : e->flight_ids_) ids.resize(static_cast<size_t>(e->max_batch()));
  e->eos_ids_ = e->checkpoint_.generation.eos_token_ids;
  if (auto eos = e->tokenizer_ ? e->tokenizer_->eos_token_id() : std::nullopt; eos && std::find(e->eos_ids_.begin(), e->eos_ids_.end(), *eos) == e->eos_ids_.end())
    e->eos_ids_.push_back(*eos);
  return e;
}

Result<size_t> Engine::prefill_chunk(int32_t seq, std::span<const int32_t> prompt, size_t start,
                                     std::vector<float>& logits) {
  const int64_t vocab = model_->info().vocab_size;
  logits.resize(static_cast<size_t>(vocab));
  const size_t end = std::min(prompt.size(), start + static_cast<size_t>(model_->max_rows()));
  Batch batch;
  for (size_t i = start; i < end; ++i) batch.add(prompt[i], static_cast<int32_t>(i), seq, /*logits=*/i + 1 == prompt.size());
  HELIUM_RETURN_IF_ERROR(kv_->plan(batch));
  std::span<float> out = end == prompt.size() ? std::span<float>(logits) : std::span<float>();
  HELIUM_RETURN_IF_ERROR(run_forward(batch, ForwardOutputs{out, {}}));
  return end;
}

Status Engine::run_forward(const Batch& batch, const ForwardOutputs& out) {
  ++forwards_;
  return model_->forward(batch, kv_->layers(), out);
}

std::optional<Engine::CachedSequence> Engine::take_cached_prefix(std::span<const int32_t> prompt) {
  size_t best = prompt_cache_.size(), best_len = 0;
  for (size_t i = 0; i < prompt_cache_.size(); ++i) {
    const auto& tokens = prompt_cache_[i].tokens;
    const size_t n = std::min(tokens.size(), prompt.size() - 1);
    size_t common = 0;
    while (common < n && tokens[common] == prompt[common]) ++common;
    if (common > best_len) best = i, best_len = common;
  }
  if (best == prompt_cache_.size()) return std::nullopt;
  CachedSequence taken = std::move(prompt_cache_[best]);
  prompt_cache_.erase(prompt_cache_.begin() + static_cast<std::ptrdiff_t>(best));
  taken.tokens.resize(best_len);
  kv_->trim(taken.seq, static_cast<int64_t>(best_len));
  return taken;
}

void Engine::evict_cached_until_free(int64_t positions) {
  while (kv_->free_positions() < positions && !prompt_cache_.empty()) {
    auto lru = std::min_element(prompt_cache_.begin(), prompt_cache_.end(),
                                [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
    kv_->free_sequence(lru->seq);
    prompt_cache_.erase(lru);
  }
}

void Engine::keep_in_cache(int32_t seq, std::vector<int32_t> tokens) {
  tokens.resize(static_cast<size_t>(std::min<int64_t>(kv_->length(seq), static_cast<int64_t>(tokens.size()))));
  kv_->trim(seq, kv_->length(seq));  // pages reserved for tokens never written go back
  if (prompt_cache_limit_ == 0 || tokens.empty()) {
    kv_->free_sequence(seq);
    return;
  }
  prompt_cache_.push_back({seq, std::move(tokens), ++cache_clock_});
  if (static_cast<int>(prompt_cache_.size()) > prompt_cache_limit_) {
    auto lru = std::min_element(prompt_cache_.begin(), prompt_cache_.end(),
                                [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
    kv_->free_sequence(lru->seq);
    prompt_cache_.erase(lru);
  }
}

void Engine::clear_prompt_cache() {
  for (const auto& c : prompt_cache_) kv_->free_sequence(c.seq);
  prompt_cache_.clear();
}

int64_t Engine::positions_needed(int64_t prompt_len, int64_t limit, int64_t reused) const {
  const int64_t page = kv_->page_size();
  return ((prompt_len + limit + page - 1) / page - (reused + page - 1) / page) * page;
}

int Engine::max_batch() const { return std::min(model_->max_rows(), KvCache::kMaxTreeRows); }

bool Engine::has_room_for(const GenerationRequest& req) const {
  const int64_t prompt_len = static_cast<int64_t>(req.prompt.size());
  const int64_t limit = std::min<int64_t>(std::max(req.max_new_tokens, 0), context() - prompt_len);
  int64_t evictable = 0;
  for (const auto& c : prompt_cache_) evictable += (kv_->length(c.seq) + kv_->page_size() - 1) / kv_->page_size() * kv_->page_size();
  return positions_needed(prompt_len, limit, 0) <= kv_->free_positions() + evictable;
}

Result<std::unique_ptr<ActiveGeneration>> Engine::begin(const GenerationRequest& req, TokenCallback on_token) {
  const int64_t vocab = model_->info().vocab_size;
  if (req.prompt.empty()) return Status::error("the prompt is empty");
  for (int32_t t : req.prompt)
    if (t < 0 || t >= vocab) return Status::error("prompt token " + std::to_string(t) + " is outside the vocabulary");
  if (std::string bad = validate_sampling(req.sampling, vocab); !bad.empty()) return Status::error(bad);
  if (req.max_new_tokens < 0) return Status::error("max_new_tokens must be >= 0");
  if (!tokenizer_ && !req.stop_strings.empty())
    return Status::error("stop strings need the model's tokenizer, and it was loaded without one");
  const int64_t prompt_len = static_cast<int64_t>(req.prompt.size());
  if (prompt_len + 1 > context())
    return Status::error("the prompt has " + std::to_string(prompt_len) + " tokens; the context holds " +
                         std::to_string(context()) + " (room for at least one more token is needed)");

  auto g = std::make_unique<ActiveGeneration>();
  g->request = req;
  g->on_token = std::move(on_token);
  g->limit = std::min<int64_t>(req.max_new_tokens, context() - prompt_len);
  g->result.prompt_tokens = static_cast<int>(prompt_len);
  auto t0 = std::chrono::steady_clock::now();
  std::optional<CachedSequence> cached = take_cached_prefix(req.prompt);
  g->seq = cached ? cached->seq : kv_->new_sequence();
  SequenceGuard guard{*kv_, g->seq};
  const size_t reused = cached ? cached->tokens.size() : 0;
  g->result.cached_tokens = static_cast<int>(reused);
  // Room for the rest of the prompt and every token this request may write, so that decoding cannot run
  // out of pages half-way: cached sequences give way first.
  const int64_t needed = positions_needed(prompt_len, g->limit, static_cast<int64_t>(reused));
  evict_cached_until_free(needed);
  if (needed > kv_->free_positions())
    return Status::error("the KV cache has " + std::to_string(kv_->free_positions()) +
                         " free positions, the request needs " + std::to_string(needed));
  HELIUM_RETURN_IF_ERROR(kv_->reserve(g->seq, prompt_len + g->limit));
  g->prefilled = static_cast<int64_t>(reused);
  g->result.prefill_seconds = seconds_since(t0);  // the chunks add theirs (prefill_step)

  g->stops = req.stop_tokens;
  if (!req.ignore_eos) g->stops.insert(g->stops.end(), eos_ids_.begin(), eos_ids_.end());
  g->context_tokens = req.prompt;
  if (tokenizer_) g->detok = std::make_unique<IncrementalDetokenizer>(tokenizer_, /*skip_special_tokens=*/false);
  g->stop_strings = std::make_unique<StopStrings>(req.stop_strings);
  g->result.finish_reason = "length";
  guard.release();
  return g;
}

Status Engine::prefill_step(ActiveGeneration& g) {
  if (!g.prefilling()) return Status::ok();
  const auto t0 = std::chrono::steady_clock::now();
  HELIUM_ASSIGN_OR_RETURN(size_t end, prefill_chunk(g.seq, g.request.prompt, static_cast<size_t>(g.prefilled), g.logits));
  g.prefilled = static_cast<int64_t>(end);
  g.result.prefill_seconds += seconds_since(t0);
  if (!g.prefilling()) {
    g.done = g.limit == 0;
    g.decode_start = std::chrono::steady_clock::now();
  }
  return Status::ok();
}

double Engine::next_uniform(const ActiveGeneration& g) {
  const auto position = static_cast<uint64_t>(g.request.prompt.size()) + static_cast<uint64_t>(g.generated);
  return philox_uniform(g.request.sampling.seed, position);  // position: where the sampled token goes
}

bool Engine::sample_next(ActiveGeneration& g) {
  int32_t token = g.device_token;
  g.device_token = -1;
  if (token < 0)
    token = sample_token(g.logits, g.request.sampling, g.context_tokens, static_cast<size_t>(g.generated),
                         next_uniform(g), g.scratch);
  if (std::find(g.stops.begin(), g.stops.end(), token) != g.stops.end()) {
    g.result.finish_reason = "stop";
    return false;
  }
  ++g.generated;
  g.context_tokens.push_back(token);
  g.result.tokens.push_back(token);
  const size_t safe = g.stop_strings->feed(g.detok ? g.detok->push(token) : std::string());
  std::string_view fresh = std::string_view(g.stop_strings->text()).substr(g.emitted, safe - g.emitted);
  g.emitted = safe;
  if (g.on_token && !g.on_token(token, fresh)) {
    g.result.finish_reason = "cancelled";
    return false;
  }
  if (g.stop_strings->stopped()) {
    g.result.finish_reason = "stop";
    return false;
  }
  return g.generated < g.limit;  // no forward for a token that will not be sampled
}

Status Engine::step(std::span<ActiveGeneration* const> generations) {
  const bool all_greedy = std::all_of(generations.begin(), generations.end(), [](const ActiveGeneration* g) {
    return g->done || g->prefilling() || g->request.sampling.plain_greedy();
  });
  if (pipeline_ && all_greedy) return pipelined_step(generations);
  HELIUM_RETURN_IF_ERROR(settle());
  std::vector<ActiveGeneration*> running;
  for (ActiveGeneration* g : generations) {
    if (g->done || g->prefilling()) continue;
    if (sample_next(*g)) running.push_back(g);
    else g->done = true;
  }
  if (running.empty()) return Status::ok();
  HELIUM_RETURN_IF_ERROR(fits_one_forward(running.size()));
  const int64_t vocab = model_->info().vocab_size;
  Batch batch;
  for (const ActiveGeneration* g : running)
    batch.add(g->context_tokens.back(), static_cast<int32_t>(g->context_tokens.size() - 1), g->seq, true);
  HELIUM_RETURN_IF_ERROR(kv_->plan(batch));
  // When every generation is plain greedy the device takes the argmax and one id per row comes back
  // instead of a vocabulary of logits (the same token sample_token would pick from them).
  if (all_greedy) {
    step_argmax_.resize(running.size());
    HELIUM_RETURN_IF_ERROR(run_forward(batch, ForwardOutputs{{}, step_argmax_}));
    for (size_t i = 0; i < running.size(); ++i) running[i]->device_token = step_argmax_[i];
    return Status::ok();
  }
  // When every generation samples on the raw logits with top_k off or up to Backend::kMaxSelectTopK, the
  // device selects a small superset of each row's best top_k (or best kMaxSelectTopK, with the row's
  // softmax total, when top_k is off) and only that comes back; the token is drawn here from it
  // (sample_from_candidates: what sample_token would draw from the logits), and a draw that reaches past
  // the selection (or a set too large to come back) copies the row's logits after all.
  const bool all_candidates = std::all_of(running.begin(), running.end(), [](const ActiveGeneration* g) {
    return g->request.sampling.device_candidates(Backend::kMaxSelectTopK);
  });
  if (all_candidates) {
    const size_t n = running.size();
    step_temperature_.resize(n);
    step_top_k_.resize(n);
    bool totals = false;
    for (size_t i = 0; i < n; ++i) {
      const SamplingParams& p = running[i]->request.sampling;
      step_temperature_[i] = p.temperature;
      step_top_k_[i] = p.top_k > 0 ? p.top_k : Backend::kMaxSelectTopK;
      totals |= p.top_k == 0;
    }
    step_x_.resize(n * kMaxCandidates);
    step_ids_.resize(n * kMaxCandidates);
    step_count_.resize(n);
    step_valid_.resize(n);
    step_total_.resize(totals ? n : 0);
    const CandidateOutputs cand{step_temperature_, step_top_k_, step_x_, step_ids_, step_count_, step_valid_, step_total_};
    HELIUM_RETURN_IF_ERROR(run_forward(batch, ForwardOutputs{{}, {}, cand}));
    for (size_t i = 0; i < n; ++i) {
      ActiveGeneration& g = *running[i];
      g.device_token = -1;
      if (step_count_[i] <= kMaxCandidates) {  // else the set did not fit
        const auto from = static_cast<size_t>(i * kMaxCandidates), count = static_cast<size_t>(step_count_[i]);
        const RowCandidates set{std::span(step_x_).subspan(from, count), std::span(step_ids_).subspan(from, count),
                                step_valid_[i], step_top_k_[i], totals ? step_total_[i] : 0.0};
        g.device_token = sample_from_candidates(set, g.request.sampling, next_uniform(g), static_cast<int32_t>(vocab),
                                                g.scratch);
      }
      if (g.device_token < 0) HELIUM_RETURN_IF_ERROR(model_->last_logits(static_cast<int>(i), g.logits));
    }
    return Status::ok();
  }
  step_logits_.resize(running.size() * static_cast<size_t>(vocab));
  HELIUM_RETURN_IF_ERROR(run_forward(batch, ForwardOutputs{step_logits_, {}}));
  for (size_t i = 0; i < running.size(); ++i)
    std::copy_n(step_logits_.begin() + static_cast<std::ptrdiff_t>(i * vocab), vocab, running[i]->logits.begin());
  return Status::ok();
}

Status Engine::pipelined_step(std::span<ActiveGeneration* const> generations) {
  // The step in flight may be followed only while its ids are where it left them (no other forward ran)
  // and its generations are all in this step.
  if (flight_) {
    bool follow = flight_->forward == forwards_;
    for (const ActiveGeneration* g : flight_->rows)
      follow &= g == nullptr || std::find(generations.begin(), generations.end(), g) != generations.end();
    if (!follow) HELIUM_RETURN_IF_ERROR(settle());
  }
  // Rows: first the generations whose next token is known here (sampled now, as step() does), then those
  // whose token is in flight, unless that token is their last (then they take no row).
  Batch batch;
  std::vector<ActiveGeneration*> rows;
  std::vector<int32_t> sources;
  for (ActiveGeneration* g : generations) {
    if (g->done || g->prefilling() || g->in_flight) continue;
    if (!sample_next(*g)) {
      g->done = true;
      continue;
    }
    batch.add(g->context_tokens.back(), static_cast<int32_t>(g->context_tokens.size() - 1), g->seq, true);
    rows.push_back(g);
    sources.push_back(-1);
  }
  if (flight_) {
    for (size_t i = 0; i < flight_->rows.size(); ++i) {
      ActiveGeneration* g = flight_->rows[i];
      if (g == nullptr || g->generated + 1 >= g->limit) continue;
      batch.add(0, static_cast<int32_t>(g->context_tokens.size()), g->seq, true);  // the token in flight
      rows.push_back(g);
      sources.push_back(static_cast<int32_t>(i));
    }
  }
  HELIUM_RETURN_IF_ERROR(fits_one_forward(rows.size()));
  const int buffer = flight_ ? 1 - flight_->buffer : 0;
  if (!rows.empty()) {
    if (flight_) batch.token_sources = std::move(sources);
    HELIUM_RETURN_IF_ERROR(kv_->plan(batch));
    ForwardOutputs out{{}, std::span(flight_ids_[static_cast<size_t>(buffer)]).first(rows.size())};
    out.deferred = true;
    HELIUM_RETURN_IF_ERROR(run_forward(batch, out));
  }
  // The ids of the step before, sampled as an unpipelined step would start by sampling them. A generation
  // that stops there had its next row queued above for nothing: that row is undone (its KV position
  // dropped, its id never read), leaving the KV as an unpipelined decode leaves it.
  HELIUM_ASSIGN_OR_RETURN(const std::vector<ActiveGeneration*> landed, land_flight());
  for (ActiveGeneration* g : landed) {
    if (g == nullptr) continue;
    const auto written = static_cast<int64_t>(g->context_tokens.size());  // KV positions before the queued row
    if (sample_next(*g)) continue;
    g->done = true;
    if (auto queued = std::find(rows.begin(), rows.end(), g); queued != rows.end()) {
      *queued = nullptr;
      kv_->trim(g->seq, written);
    }
  }
  // A step queued is always collected later, even when every row of it was undone: the model hands
  // deferred ids back in order.
  if (!rows.empty()) {
    for (ActiveGeneration* g : rows)
      if (g != nullptr) g->in_flight = true;
    flight_ = Flight{std::move(rows), buffer, forwards_};
  }
  return Status::ok();
}

Result<std::vector<ActiveGeneration*>> Engine::land_flight() {
  if (!flight_) return std::vector<ActiveGeneration*>();
  Flight f = std::move(*flight_);
  flight_.reset();
  HELIUM_RETURN_IF_ERROR(model_->collect());
  for (size_t i = 0; i < f.rows.size(); ++i) {
    if (f.rows[i] == nullptr) continue;
    f.rows[i]->in_flight = false;
    f.rows[i]->device_token = flight_ids_[static_cast<size_t>(f.buffer)][i];
  }
  return std::move(f.rows);
}

Status Engine::settle() { return land_flight().status(); }

Status Engine::fits_one_forward(size_t rows) const {
  if (static_cast<int>(rows) <= max_batch()) return Status::ok();
  return Status::error("a step of " + std::to_string(rows) + " generations; at most " + std::to_string(max_batch()) +
                       " fit one forward");
}

GenerationResult Engine::end(ActiveGeneration& g) {
  // A generation that stopped is never in flight; one ended before it stopped must leave the step in
  // flight first (its ids are then only handed over, as an unpipelined step leaves them). Where that step
  // failed (a device error), its KV position is not known to hold what the tokens say: the sequence is
  // dropped rather than kept for the prompt cache.
  const bool settled = !g.in_flight || settle().is_ok();
  GenerationResult& result = g.result;
  if (!g.stop_strings->stopped() && result.finish_reason != "cancelled") {
    size_t safe = g.stop_strings->feed(g.detok ? g.detok->flush() : std::string());
    if (!g.stop_strings->stopped()) safe = g.stop_strings->text().size();  // end of stream: nothing to hold back
    std::string_view rest = std::string_view(g.stop_strings->text()).substr(g.emitted, safe - g.emitted);
    if (!rest.empty() && g.on_token) g.on_token(-1, rest);
    g.emitted = safe;
    if (g.stop_strings->stopped()) result.finish_reason = "stop";
  }
  result.text = g.stop_strings->text().substr(0, g.emitted);
  result.decode_seconds = seconds_since(g.decode_start);
  if (settled) keep_in_cache(g.seq, std::move(g.context_tokens));
  else kv_->free_sequence(g.seq);
  g.seq = -1;
  g.done = true;
  return std::move(result);
}

void Engine::abort(ActiveGeneration& g) {
  // The step in flight must not name it once it is gone; the sequence is freed whatever that step's status.
  if (g.in_flight) (void)settle();
  if (g.seq >= 0) kv_->free_sequence(g.seq);
  g.seq = -1;
  g.done = true;
}

Result<GenerationResult> Engine::generate(const GenerationRequest& req, const TokenCallback& on_token) {
  HELIUM_ASSIGN_OR_RETURN(std::unique_ptr<ActiveGeneration> g, begin(req, on_token));
  while (g->prefilling()) {
    if (Status st = prefill_step(*g); !st) {
      abort(*g);
      return st;
    }
  }
  ActiveGeneration* one[] = {g.get()};
  while (!g->done) {
    if (Status st = step(one); !st) {
      abort(*g);
      return st;
    }
  }
  return end(*g);
}

}  // namespace helium
