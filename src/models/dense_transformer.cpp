#include "models/dense_transformer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string_view>
#include <tuple>

namespace helium {
namespace {

std::string layer_name(int layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

// Where a forward of `rows` rows keeps its row metadata in the step-inputs buffer, in I32 elements: with
// s = rows rounded up to 4 (every region 16-byte aligned), the tree masks (I64) [0, 2s), then tokens,
// positions, KV write slots, row table, prefix lengths and logit row index, s each, then `tables` block
// tables of `width` pages. The offsets depend on `rows` only, which a recorded graph's key holds.
struct StepInputs {
  int64_t s, tables, width;
  StepInputs(int64_t rows, int64_t tables_, int64_t width_) : s((rows + 3) / 4 * 4), tables(tables_), width(width_) {}
  enum Region { kTokens = 2, kPositions, kWriteSlots, kRowTable, kPrefixLens, kLogitIndex, kTokenSources, kBlockTables };
  int64_t offset(Region r) const { return r * s; }
  int64_t total() const { return offset(kBlockTables) + tables * width; }
};

class DenseTransformer final : public Model {
 public:
  DenseTransformer(DenseConfig config, Backend& backend, int max_rows)
      : config_(std::move(config)), backend_(backend), max_rows_(max_rows) {}

  Status init(DenseWeights host, const WeightMap& map, int64_t max_context, int page_size, DType kv_dtype,
              bool retune);
  const ModelInfo& info() const override { return info_; }
  KvSpec kv_spec() const override {
    return {config_.layers, static_cast<int64_t>(config_.n_kv_heads) * config_.head_dim};
  }
  int max_rows() const override { return max_rows_; }
  using Model::forward;
  Status forward(const Batch& batch, std::span<const LayerKv> kv, const ForwardOutputs& out) override;

 private:
  // After a forward: the n logit rows' sampling candidates (ForwardOutputs::candidates).
  Status copy_candidates(const CandidateOutputs& cand, int n);
  Status last_logits(int row, std::span<float> out) override;
  Status collect() override;
  // An activation buffer of (max_rows, cols) of `dtype`, allocated once.
  Result<Tensor> plan(int64_t rows, int64_t cols, DType dtype);
  void attention_block(const DenseLayerWeights& w, const LayerKv& kv, const AttentionLayout& layout,
                       const Tensor& positions, int rows);
  // next: the following layer's weights (null after the last), whose input norm the MLP's residual add
  // may prepare (Backend::prepare_norm).
  void mlp_block(const DenseLayerWeights& w, const DenseLayerWeights* next, int rows);

  DenseConfig config_;
  Backend& backend_;
  int max_rows_;
  int64_t max_context_ = 0;
  ModelInfo info_;
  DenseWeights w_;
  std::vector<std::shared_ptr<DeviceBuffer>> buffers_;

  // Activations, (max_rows, ·) F32 unless noted.
  Tensor x_;            // residual stream (rows, hidden)
  Tensor xn_;           // normed input / block output (rows, hidden)
  Tensor q_, k_, v_;    // (rows, n_heads * head_dim), (rows, kv_dim) x2
  Tensor attn_out_;     // (rows, n_heads * head_dim)
  Tensor gate_, up_;    // (rows, intermediate)
  Tensor logits_;       // (min(rows, kMaxLogitRows), vocab)
  Tensor argmax_;       // (min(rows, kMaxLogitRows)) I32: each logit row's greedy token
  // Sampling candidates per logit row (CandidateOutputs): x F32 and ids I32 (rows, kMaxCandidates);
  // temperature F32, top_k, count, valid I32, the softmax total F64 (rows).
  Tensor cand_x_, cand_ids_, cand_temperature_, cand_top_k_, cand_count_, cand_valid_, cand_total_;
  int last_logit_rows_ = 0;  // the logit rows of the last forward (last_logits)
  Tensor inv_freq_;     // (rot_dim / 2)
  // A forward's row metadata, in one device buffer that one copy fills (StepInputs): a decode step's
  // eight small uploads were eight copies on the stream before its graph, the GPU idle in between.
  Tensor step_inputs_;  // I32, room for StepInputs(max_rows, one full table per row)
  int64_t max_pages_ = 0;
  std::vector<int32_t> step_upload_;  // host staging of step_inputs_, reused
  // HELIUM_STEP_UPLOAD=regions (diagnostic, for comparisons): one copy per region, as before StepInputs.
  bool upload_by_region_ = false;
  // Logit rows whose argmax ids the last forward left in argmax_ (0 when it took none): what the next
  // forward's Batch::token_sources may name.
  int chainable_rows_ = 0;
  // Deferred forwards not yet collected, oldest first: the backend's mark after each one's argmax copy.
  std::deque<uint64_t> pending_;

  // Logits are wanted for the last prompt row, decode rows and tree nodes: a forward may ask for at most
  // this many (a prefill chunk of thousands of rows must not plan thousands of vocabulary-wide rows).
  static constexpr int kMaxLogitRows = 64;
  // Recorded decode steps, by (rows, logit rows, tree masks present, argmax, token sources present,
  // attention key bucket, KV cache).
  static constexpr int kMaxGraphRows = 64;
  struct GraphKey {
    int rows, logit_rows;
    bool tree, argmax, chained;
    int32_t max_keys;  // the attention grid's positions
    const void* kv;
    bool operator<(const GraphKey& o) const {
      return std::tie(rows, logit_rows, tree, argmax, chained, max_keys, kv) <
             std::tie(o.rows, o.logit_rows, o.tree, o.argmax, o.chained, o.max_keys, o.kv);
    }
  };
  std::map<GraphKey, std::unique_ptr<OpGraph>> graphs_;
};

Result<Tensor> DenseTransformer::plan(int64_t rows, int64_t cols, DType dtype) {
  size_t bytes = static_cast<size_t>(rows * cols) * dtype_bytes(dtype);
  HELIUM_ASSIGN_OR_RETURN(auto buffer, backend_.allocate(bytes));
  buffers_.push_back(buffer);
  return Tensor(buffer->data(), dtype, {rows, cols});
}

Status DenseTransformer::init(DenseWeights host, const WeightMap& map, int64_t max_context, int page_size,
                              DType kv_dtype, bool retune) {
  const DenseConfig& c = config_;
  max_context_ = max_context;
  // Import every weight (zero-copy on the CPU backend). Dummy weights (shape only) are created on the
  // device: vectors (norms, biases) near 1, matrices uniform with a 1/sqrt(fan-in) scale, seeded in the
  // fixed order of this function so every backend builds the same model.
  uint64_t dummy_seed = 0x68656c69756dull;  // "helium"
  // Dummy seeds follow one fixed order of the present tensors (embed, final norm, head, then per layer
  // as listed in DenseLayerWeights), whether or not projections get stacked below.
  std::map<const Tensor*, uint64_t> seeds;
  auto assign_seed = [&](const Tensor& t) {
    if (t.rank != 0) seeds[&t] = dummy_seed++;
  };
  assign_seed(host.embed_tokens);
  assign_seed(host.final_norm);
  if (!c.tied_embeddings) assign_seed(host.lm_head);
  for (const auto& l : host.layers)
    for (const Tensor* t : {&l.input_norm, &l.q_proj, &l.q_bias, &l.k_proj, &l.k_bias, &l.v_proj, &l.v_bias, &l.o_proj,
                            &l.o_bias, &l.q_norm, &l.k_norm, &l.post_attention_norm, &l.gate_proj, &l.gate_bias,
                            &l.up_proj, &l.up_bias, &l.down_proj, &l.down_bias})
      assign_seed(*t);
  // `t` is one of host's tensors (its seed key); `dst` the device memory it lands in.
  auto fill_dummy = [&](const Tensor& t, Tensor dst) {
    const float fan_in = static_cast<float>(dst.shape[dst.rank - 1]);
    if (dst.rank == 1) backend_.fill_random(dst, seeds.at(&t), 1.0f, 0.1f);
    else backend_.fill_random(dst, seeds.at(&t), 0.0f, 1.0f / std::sqrt(fan_in));
  };
  auto import = [&](Tensor& t) -> Status {
    if (t.rank == 0) return Status::ok();  // an absent optional weight
    if (t.data == nullptr) {
      HELIUM_ASSIGN_OR_RETURN(auto buffer, backend_.allocate(t.bytes()));
      buffers_.push_back(buffer);
      Tensor dst = t;
      dst.data = buffer->data();
      fill_dummy(t, dst);
      t = dst;
      return Status::ok();
    }
    HELIUM_ASSIGN_OR_RETURN(t, backend_.import_weight(t));
    return Status::ok();
  };
  // Whether `parts` can share one tensor: all present, one dtype, one rank, one column count.
  auto stackable = [](std::initializer_list<Tensor*> parts) {
    const Tensor* first = *parts.begin();
    for (const Tensor* t : parts)
      if (t->rank == 0 || t->rank != first->rank || t->dtype != first->dtype ||
          (t->rank == 2 && t->shape[1] != first->shape[1]))
        return false;
    return true;
  };
  // Stacks stackable `parts` into one device tensor in order, each part becoming a view of its rows.
  auto import_stacked = [&](std::initializer_list<Tensor*> parts, Tensor& stacked) -> Status {
    const Tensor* first = *parts.begin();
    int64_t rows = 0;
    for (const Tensor* t : parts) rows += t->shape[0];
    Tensor whole = *first;
    whole.shape[0] = rows;
    HELIUM_ASSIGN_OR_RETURN(auto buffer, backend_.allocate(whole.bytes()));
    buffers_.push_back(buffer);
    whole.data = buffer->data();
    auto* at = static_cast<uint8_t*>(whole.data);
    for (Tensor* t : parts) {
      Tensor part = *t;
      part.data = at;
      if (t->data == nullptr) fill_dummy(*t, part);
      else backend_.copy_to_device(part, t->data);
      *t = part;
      at += part.bytes();
    }
    stacked = whole;
    return Status::ok();
  };
  // Stacks weights (and their biases, when every part has one) or imports them one by one.
  auto import_projections = [&](std::initializer_list<Tensor*> weights, std::initializer_list<Tensor*> biases,
                                Tensor& stacked_w, Tensor& stacked_b) -> Status {
    bool no_biases = true;
    for (const Tensor* b : biases) no_biases = no_biases && b->rank == 0;
    if (backend_.prefers_stacked_projections() && stackable(weights) && (no_biases || stackable(biases))) {
      HELIUM_RETURN_IF_ERROR(import_stacked(weights, stacked_w));
      if (!no_biases) HELIUM_RETURN_IF_ERROR(import_stacked(biases, stacked_b));
      return Status::ok();
    }
    for (Tensor* t : weights) HELIUM_RETURN_IF_ERROR(import(*t));
    for (Tensor* b : biases) HELIUM_RETURN_IF_ERROR(import(*b));
    return Status::ok();
  };
  HELIUM_RETURN_IF_ERROR(import(host.embed_tokens));
  HELIUM_RETURN_IF_ERROR(import(host.final_norm));
  if (c.tied_embeddings) host.lm_head = host.embed_tokens;
  else HELIUM_RETURN_IF_ERROR(import(host.lm_head));
  for (auto& l : host.layers) {
    HELIUM_RETURN_IF_ERROR(import(l.input_norm));
    HELIUM_RETURN_IF_ERROR(import_projections({&l.q_proj, &l.k_proj, &l.v_proj}, {&l.q_bias, &l.k_bias, &l.v_bias},
                                              l.qkv_proj, l.qkv_bias));
    for (Tensor* t : {&l.o_proj, &l.o_bias, &l.q_norm, &l.k_norm, &l.post_attention_norm})
      HELIUM_RETURN_IF_ERROR(import(*t));
    HELIUM_RETURN_IF_ERROR(import_projections({&l.gate_proj, &l.up_proj}, {&l.gate_bias, &l.up_bias}, l.gate_up_proj,
                                              l.gate_up_bias));
    for (Tensor* t : {&l.down_proj, &l.down_bias}) HELIUM_RETURN_IF_ERROR(import(*t));
  }
  w_ = std::move(host);
  // The backend tunes its kernels for this model's own matmul shapes (cached per device and shapes).
  std::vector<MatmulShape> shapes;
  auto shape_of = [&](const Tensor& t) {
    if (t.rank == 2) shapes.push_back({t.shape[0], t.shape[1], t.dtype});
  };
  const DenseLayerWeights& l0 = w_.layers.front();
  if (l0.qkv_proj.rank != 0) shape_of(l0.qkv_proj);
  else for (const Tensor* t : {&l0.q_proj, &l0.k_proj, &l0.v_proj}) shape_of(*t);
  if (l0.gate_up_proj.rank != 0) shape_of(l0.gate_up_proj);
  else for (const Tensor* t : {&l0.gate_proj, &l0.up_proj}) shape_of(*t);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&l0.o_proj, &l0.down_proj, &w_.lm_head}) shape_of(*t);
  HELIUM_RETURN_IF_ERROR(backend_.tune_matmuls(shapes, retune));
  // And decode attention for its shape and cache (ModelOptions::kv_dtype: the cache the engine creates).
  const AttentionShape attention{c.n_heads, c.n_kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  HELIUM_RETURN_IF_ERROR(backend_.tune_attention(attention, c.hidden_size, kv_dtype, page_size, max_context, retune));

  const int64_t rows = max_rows_, q_dim = int64_t{c.n_heads} * c.head_dim, kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  HELIUM_ASSIGN_OR_RETURN(x_, plan(rows, c.hidden_size, DType::F32));
  HELIUM_ASSIGN_OR_RETURN(xn_, plan(rows, c.hidden_size, DType::F32));
  HELIUM_ASSIGN_OR_RETURN(q_, plan(rows, q_dim, DType::F32));
  HELIUM_ASSIGN_OR_RETURN(k_, plan(rows, kv_dim, DType::F32));
  HELIUM_ASSIGN_OR_RETURN(v_, plan(rows, kv_dim, DType::F32));
  HELIUM_ASSIGN_OR_RETURN(attn_out_, plan(rows, q_dim, DType::F32));
  HELIUM_ASSIGN_OR_RETURN(gate_, plan(rows, c.intermediate_size, DType::F32));
  HELIUM_ASSIGN_OR_RETURN(up_, plan(rows, c.intermediate_size, DType::F32));
  HELIUM_ASSIGN_OR_RETURN(logits_, plan(std::min<int64_t>(rows, kMaxLogitRows), c.vocab_size, DType::F32));
  HELIUM_ASSIGN_OR_RETURN(argmax_, plan(1, std::min<int64_t>(rows, kMaxLogitRows), DType::I32));
  const int64_t logit_rows = std::min<int64_t>(rows, kMaxLogitRows);
  HELIUM_ASSIGN_OR_RETURN(cand_x_, plan(logit_rows, kMaxCandidates, DType::F32));
  HELIUM_ASSIGN_OR_RETURN(cand_ids_, plan(logit_rows, kMaxCandidates, DType::I32));
  HELIUM_ASSIGN_OR_RETURN(cand_temperature_, plan(1, logit_rows, DType::F32));
  HELIUM_ASSIGN_OR_RETURN(cand_top_k_, plan(1, logit_rows, DType::I32));
  HELIUM_ASSIGN_OR_RETURN(cand_count_, plan(1, logit_rows, DType::I32));
  HELIUM_ASSIGN_OR_RETURN(cand_valid_, plan(1, logit_rows, DType::I32));
  HELIUM_ASSIGN_OR_RETURN(cand_total_, plan(1, logit_rows, DType::F64));
  HELIUM_ASSIGN_OR_RETURN(inv_freq_, plan(1, c.rope.rot_dim / 2, DType::F32));
  inv_freq_ = Tensor(inv_freq_.data, DType::F32, {c.rope.rot_dim / 2});
  backend_.copy_to_device(inv_freq_, c.rope.inv_freq.data());
  // A sequence's table covers max_context positions (+1 page of slack); at most one table per row.
  max_pages_ = (max_context_ + page_size - 1) / page_size + 1;
  HELIUM_ASSIGN_OR_RETURN(step_inputs_, plan(1, StepInputs(rows, rows, max_pages_).total(), DType::I32));
  if (const char* v = std::getenv("HELIUM_STEP_UPLOAD"); v != nullptr && *v) {
    if (std::string_view(v) != "regions" && std::string_view(v) != "one")
      return Status::error("HELIUM_STEP_UPLOAD must be 'one' or 'regions', not '" + std::string(v) + "'");
    upload_by_region_ = std::string_view(v) == "regions";
  }

  info_.family = c.family;
  info_.vocab_size = c.vocab_size;
  info_.hidden_size = c.hidden_size;
  info_.layers = c.layers;
  info_.n_heads = c.n_heads;
  info_.n_kv_heads = c.n_kv_heads;
  info_.head_dim = c.head_dim;
  info_.intermediate_size = c.intermediate_size;
  info_.max_context = max_context_;
  for (const auto& name : map.names()) {
    const WeightInfo* wi = map.find(name);
    int64_t n = 1;
    for (int64_t d : wi->shape) n *= d;
    info_.parameters += n;
    info_.weight_bytes += static_cast<int64_t>(wi->bytes);
    info_.weight_dtype = std::string(dtype_name(wi->dtype));
  }
  return Status::ok();
}

// Views the first `rows` rows of a planned (max_rows, cols) buffer.
Tensor rows_of(const Tensor& t, int64_t rows) { return t.first_rows(rows); }

Tensor vector_of(const Tensor& t, int64_t n) { return Tensor(t.data, t.dtype, {n}); }

void DenseTransformer::attention_block(const DenseLayerWeights& w, const LayerKv& kv, const AttentionLayout& layout,
                                       const Tensor& positions, int rows) {
  const DenseConfig& c = config_;
  Tensor x = rows_of(x_, rows), xn = rows_of(xn_, rows);
  Tensor q = rows_of(q_, rows), k = rows_of(k_, rows), v = rows_of(v_, rows);
  // Per-head q/k norms (Qwen3), rotary embedding, K/V into the cache, and attention: one fused op
  // (layout.write_slots are the rows' K/V slots), with the q/k/v projection too where it is stacked.
  RopeParams rope{c.head_dim, c.rope.rot_dim, c.rope.attention_scaling};
  AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  Tensor attn_out = rows_of(attn_out_, rows);
  const Tensor q_norm = c.qk_norm ? w.q_norm : Tensor(), k_norm = c.qk_norm ? w.k_norm : Tensor();
  if (w.qkv_proj.rank != 0) {
    backend_.prefetch(w.o_proj);  // for the op after attention (Backend::prefetch)
    backend_.rms_norm_qkv_attention(x, w.input_norm, c.rms_norm_eps, xn, w.qkv_proj, w.qkv_bias, q, k, v, q_norm, k_norm,
                                    positions, inv_freq_, rope, kv.k, kv.v, shape, layout, attn_out);
  } else {
    backend_.rms_norm(x, w.input_norm, c.rms_norm_eps, false, xn);
    backend_.matmul(xn, w.q_proj, w.q_bias, q);
    backend_.matmul(xn, w.k_proj, w.k_bias, k);
    backend_.matmul(xn, w.v_proj, w.v_bias, v);
    backend_.prefetch(w.o_proj);
    backend_.qk_norm_rope_attention(q, k, v, q_norm, k_norm, c.rms_norm_eps, positions, inv_freq_, rope,
                                    kv.k, kv.v, shape, layout, attn_out);
  }
  if (w.gate_up_proj.rank != 0) backend_.prepare_norm(x, w.post_attention_norm, false);  // for swiglu_mlp_add
  backend_.matmul_add(attn_out, w.o_proj, w.o_bias, xn, x);
}

void DenseTransformer::mlp_block(const DenseLayerWeights& w, const DenseLayerWeights* next, int rows) {
  const DenseConfig& c = config_;
  Tensor x = rows_of(x_, rows), xn = rows_of(xn_, rows);
  Tensor gate = rows_of(gate_, rows), up = rows_of(up_, rows);
  if (w.gate_up_proj.rank != 0) {
    if (next != nullptr && next->qkv_proj.rank != 0) backend_.prepare_norm(x, next->input_norm, false);
    backend_.swiglu_mlp_add(x, w.post_attention_norm, c.rms_norm_eps, false, xn, w.gate_up_proj, w.gate_up_bias, gate,
                            up, w.down_proj, w.down_bias);
    return;
  }
  backend_.rms_norm(x, w.post_attention_norm, c.rms_norm_eps, false, xn);
  backend_.matmul(xn, w.gate_proj, w.gate_bias, gate);
  backend_.matmul(xn, w.up_proj, w.up_bias, up);
  backend_.swiglu_matmul_add(gate, up, w.down_proj, w.down_bias, xn, x);
}

Status DenseTransformer::forward(const Batch& batch, std::span<const LayerKv> kv, const ForwardOutputs& out) {
  const DenseConfig& c = config_;
  const int rows = batch.rows();
  if (rows == 0) return Status::ok();
  if (rows > max_rows_)
    return Status::error("batch of " + std::to_string(rows) + " rows exceeds the planned " + std::to_string(max_rows_));
  if (static_cast<int>(kv.size()) != c.layers) return Status::error("KV cache has the wrong number of layers");
  if (batch.kv_write_slots.size() != static_cast<size_t>(rows) || batch.prefix_lens.size() != static_cast<size_t>(rows) ||
      batch.row_table.size() != static_cast<size_t>(rows) || batch.page_size <= 0)
    return Status::error("batch has no KV layout (the KV cache must plan it)");
  if (batch.table_width > max_pages_ || batch.n_tables > rows ||
      batch.block_tables.size() != static_cast<size_t>(batch.n_tables) * batch.table_width)
    return Status::error("batch block tables exceed the planned " + std::to_string(max_pages_) + " pages per sequence");
  const bool chained = !batch.token_sources.empty();
  if (chained && batch.token_sources.size() != static_cast<size_t>(rows))
    return Status::error("batch has " + std::to_string(batch.token_sources.size()) + " token sources for " +
                         std::to_string(rows) + " rows");
  std::vector<int32_t> logit_rows;
  int32_t most_keys = 0;  // the largest number of keys any row attends to
  for (int r = 0; r < rows; ++r) {
    if (chained && batch.token_sources[r] >= 0) {
      if (batch.token_sources[r] >= chainable_rows_)
        return Status::error("row " + std::to_string(r) + " takes its token from logit row " +
                             std::to_string(batch.token_sources[r]) + " of the previous forward, which left " +
                             std::to_string(chainable_rows_) + " argmax ids");
    } else if (chained && batch.token_sources[r] != -1) {
      return Status::error("row " + std::to_string(r) + " has token source " + std::to_string(batch.token_sources[r]) +
                           " (-1 or a logit row)");
    } else if (batch.tokens[r] < 0 || batch.tokens[r] >= c.vocab_size)
      return Status::error("token id " + std::to_string(batch.tokens[r]) + " is outside the vocabulary of " +
                           std::to_string(c.vocab_size));
    const int32_t span = batch.prefix_lens[r] + (batch.tree_masks.empty() ? 0 : std::popcount(batch.tree_masks[r]));
    if (span <= 0 || span > max_context_)
      return Status::error("row " + std::to_string(r) + " attends to " + std::to_string(span) +
                           " positions; the context holds " + std::to_string(max_context_));
    most_keys = std::max(most_keys, span);
    if (batch.want_logits[r]) logit_rows.push_back(r);
  }
  if (!out.logits.empty() && out.logits.size() != logit_rows.size() * static_cast<size_t>(c.vocab_size))
    return Status::error("logits buffer has the wrong size");
  if (!out.argmax.empty() && out.argmax.size() != logit_rows.size())
    return Status::error("argmax buffer has the wrong size");
  if (const auto& cand = out.candidates) {
    const size_t n_rows = logit_rows.size();
    if (!out.argmax.empty()) return Status::error("a forward returns either argmax ids or sampling candidates");
    if (cand->temperature.size() != n_rows || cand->top_k.size() != n_rows || cand->count.size() != n_rows ||
        cand->valid.size() != n_rows || cand->x.size() != n_rows * kMaxCandidates ||
        cand->ids.size() != n_rows * kMaxCandidates || (!cand->total.empty() && cand->total.size() != n_rows))
      return Status::error("candidate buffers have the wrong size");
    for (size_t r = 0; r < n_rows; ++r)
      if (!(cand->temperature[r] > 0.0f) || cand->top_k[r] < 1 || cand->top_k[r] > Backend::kMaxSelectTopK)
        return Status::error("candidates need a temperature > 0 and top_k in 1.." +
                             std::to_string(Backend::kMaxSelectTopK));
  }
  const bool want_argmax = !out.argmax.empty();
  if (out.deferred && (!out.logits.empty() || out.candidates))
    return Status::error("a deferred forward returns argmax ids only");
  if (logit_rows.size() > static_cast<size_t>(logits_.shape[0]))
    return Status::error(std::to_string(logit_rows.size()) + " rows ask for logits; at most " +
                         std::to_string(logits_.shape[0]) + " may");

  // Graphs replay decode-sized batches (the same kernels on the same buffers): every shape a kernel
  // sees must then be fixed per graph, so the block tables are uploaded full width (one table per row)
  // and attention is sized for the whole context. Larger batches (prefill) run directly.
  const bool graph = backend_.supports_graphs() && rows <= kMaxGraphRows;
  const StepInputs in(rows, graph ? rows : batch.n_tables, graph ? max_pages_ : batch.table_width);
  const int n = static_cast<int>(logit_rows.size());
  std::vector<int32_t>& up = step_upload_;
  up.assign(static_cast<size_t>(in.total()), 0);
  auto put = [&](StepInputs::Region r, const auto& values, size_t count) {
    std::memcpy(up.data() + in.offset(r), values.data(), count * sizeof(values[0]));
  };
  if (!batch.tree_masks.empty()) std::memcpy(up.data(), batch.tree_masks.data(), rows * sizeof(int64_t));
  put(StepInputs::kTokens, batch.tokens, rows);
  put(StepInputs::kPositions, batch.positions, rows);
  put(StepInputs::kWriteSlots, batch.kv_write_slots, rows);
  put(StepInputs::kRowTable, batch.row_table, rows);
  put(StepInputs::kPrefixLens, batch.prefix_lens, rows);
  put(StepInputs::kLogitIndex, logit_rows, n);
  if (chained) put(StepInputs::kTokenSources, batch.token_sources, rows);
  for (int64_t t = 0; t < batch.n_tables; ++t)
    std::copy_n(batch.block_tables.begin() + t * batch.table_width, batch.table_width,
                up.begin() + in.offset(StepInputs::kBlockTables) + t * in.width);
  int32_t* base = step_inputs_.as<int32_t>();
  if (upload_by_region_) {
    for (int r = 0; r < StepInputs::kBlockTables; ++r)
      backend_.copy_to_device(Tensor(base + r * in.s, DType::I32, {in.s}), up.data() + r * in.s);
    const int64_t tables_at = in.offset(StepInputs::kBlockTables);
    backend_.copy_to_device(Tensor(base + tables_at, DType::I32, {in.total() - tables_at}), up.data() + tables_at);
  } else {
    backend_.copy_to_device(Tensor(base, DType::I32, {in.total()}), up.data());
  }
  auto region = [&](StepInputs::Region r, int64_t count) { return Tensor(base + in.offset(r), DType::I32, {count}); };
  const Tensor tokens = region(StepInputs::kTokens, rows), positions = region(StepInputs::kPositions, rows);
  const Tensor logit_index = region(StepInputs::kLogitIndex, n);
  const Tensor token_sources = region(StepInputs::kTokenSources, rows);
  AttentionLayout layout;
  layout.page_size = batch.page_size;
  layout.block_tables = Tensor(base + in.offset(StepInputs::kBlockTables), DType::I32, {in.tables, in.width});
  layout.row_table = region(StepInputs::kRowTable, rows);
  layout.prefix_lens = region(StepInputs::kPrefixLens, rows);
  layout.write_slots = region(StepInputs::kWriteSlots, rows);
  if (!batch.tree_masks.empty()) layout.tree_masks = Tensor(base, DType::I64, {rows});
  // A recorded graph keeps its attention grid, sized for max_keys positions: graphs are recorded per
  // power-of-two bucket of the longest row's keys (1K, 2K, ... up to the context), so a short context
  // does not launch (and skip) the partitions of the whole context every step.
  int32_t key_bucket = 1024;
  while (key_bucket < most_keys) key_bucket *= 2;
  layout.max_keys = graph ? static_cast<int32_t>(std::min<int64_t>(key_bucket, max_context_)) : most_keys;

  auto compute = [&] {
    // A step with token sources reads them every replay of its graph (-1 for a row whose token came
    // from the host); steps without take the plain embedding.
    if (chained) backend_.embedding_from(w_.embed_tokens, tokens, token_sources, argmax_, rows_of(x_, rows));
    else backend_.embedding(w_.embed_tokens, tokens, rows_of(x_, rows));
    for (int l = 0; l < c.layers; ++l) {
      attention_block(w_.layers[l], kv[l], layout, positions, rows);
      mlp_block(w_.layers[l], l + 1 < c.layers ? &w_.layers[l + 1] : nullptr, rows);
    }
    if (n == 0) return;
    // Only the rows whose logits are wanted go through the final norm and the head.
    Tensor picked = rows_of(xn_, n);
    backend_.gather_rows(rows_of(x_, rows), logit_index, picked);
    const Tensor logits_out[] = {rows_of(logits_, n)};
    backend_.rms_norm_matmul_split(picked, w_.final_norm, c.rms_norm_eps, false, picked, w_.lm_head, Tensor(),
                                   logits_out);
    if (want_argmax) backend_.argmax_rows(rows_of(logits_, n), vector_of(argmax_, n));
  };
  if (graph) {
    const GraphKey key{rows, n, !batch.tree_masks.empty(), want_argmax, chained, layout.max_keys, kv[0].k.data};
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
      backend_.begin_capture();
      compute();
      HELIUM_ASSIGN_OR_RETURN(auto recorded, backend_.end_capture());
      it = graphs_.emplace(key, std::move(recorded)).first;
    }
    it->second->replay();
  } else {
    compute();
  }
  last_logit_rows_ = n;
  chainable_rows_ = want_argmax ? n : 0;
  if (out.deferred) {
    if (n > 0 && want_argmax) backend_.copy_to_host(out.argmax.data(), vector_of(argmax_, n));
    pending_.push_back(backend_.mark());
    return Status::ok();
  }
  pending_.clear();  // the synchronisation below reaches them all
  if (out.candidates && n > 0) return copy_candidates(*out.candidates, n);
  if (n > 0 && !out.logits.empty()) backend_.copy_to_host(out.logits.data(), rows_of(logits_, n));
  if (n > 0 && want_argmax) backend_.copy_to_host(out.argmax.data(), vector_of(argmax_, n));
  backend_.synchronize();
  return Status::ok();
}

Status DenseTransformer::collect() {
  if (pending_.empty()) return Status::ok();
  backend_.wait_for(pending_.front());
  pending_.pop_front();
  return Status::ok();
}

// The logit rows' sampling candidates, selected where the logits are (outside the recorded graph: the
// settings change from step to step); a row whose set overflows is the caller's to copy (last_logits).
// Each row's whole x/ids buffers come back (16 KB a row), not just its `count` entries: knowing the counts
// first would take a second synchronisation, which costs more than the copy.
Status DenseTransformer::copy_candidates(const CandidateOutputs& cand, int n) {
  backend_.copy_to_device(vector_of(cand_temperature_, n), cand.temperature.data());
  backend_.copy_to_device(vector_of(cand_top_k_, n), cand.top_k.data());
  const bool totals = !cand.total.empty();
  backend_.select_candidates(rows_of(logits_, n), vector_of(cand_temperature_, n), vector_of(cand_top_k_, n),
                             rows_of(cand_x_, n), rows_of(cand_ids_, n), vector_of(cand_count_, n),
                             vector_of(cand_valid_, n), totals ? vector_of(cand_total_, n) : Tensor());
  backend_.copy_to_host(cand.count.data(), vector_of(cand_count_, n));
  backend_.copy_to_host(cand.valid.data(), vector_of(cand_valid_, n));
  if (totals) backend_.copy_to_host(cand.total.data(), vector_of(cand_total_, n));
  backend_.copy_to_host(cand.x.data(), rows_of(cand_x_, n));
  backend_.copy_to_host(cand.ids.data(), rows_of(cand_ids_, n));
  backend_.synchronize();
  return Status::ok();
}

Status DenseTransformer::last_logits(int row, std::span<float> out) {
  const int64_t vocab = config_.vocab_size;
  if (row < 0 || row >= last_logit_rows_)
    return Status::error("logit row " + std::to_string(row) + " of a forward that gave " +
                         std::to_string(last_logit_rows_));
  if (out.size() != static_cast<size_t>(vocab)) return Status::error("logits buffer has the wrong size");
  backend_.copy_to_host(out.data(), logits_.rows_from(row).first_rows(1));
  backend_.synchronize();
  return Status::ok();
}

}  // namespace

Result<DenseConfig> read_dense_config(const Checkpoint& checkpoint) {
  ConfigReader r(checkpoint.config, checkpoint.dir + "/config.json");
  DenseConfig c;
  c.family = checkpoint.model_type;
  HELIUM_ASSIGN_OR_RETURN(c.vocab_size, r.integer("vocab_size"));
  HELIUM_ASSIGN_OR_RETURN(c.hidden_size, r.integer("hidden_size"));
  HELIUM_ASSIGN_OR_RETURN(c.intermediate_size, r.integer("intermediate_size"));
  HELIUM_ASSIGN_OR_RETURN(int64_t layers, r.integer("num_hidden_layers"));
  HELIUM_ASSIGN_OR_RETURN(int64_t heads, r.integer("num_attention_heads"));
  c.layers = static_cast<int>(layers);
  c.n_heads = static_cast<int>(heads);
  c.n_kv_heads = static_cast<int>(r.integer_or("num_key_value_heads", heads));
  if (c.hidden_size <= 0 || c.layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.vocab_size <= 0 ||
      c.intermediate_size <= 0)
    return r.error("sizes must be positive");
  if (c.n_heads % c.n_kv_heads != 0)
    return r.error("num_attention_heads " + std::to_string(c.n_heads) + " is not a multiple of num_key_value_heads " +
                   std::to_string(c.n_kv_heads));
  c.head_dim = static_cast<int>(r.integer_or("head_dim", c.hidden_size / c.n_heads));
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) return r.error("head_dim must be positive and even");
  c.max_context = r.integer_or("max_position_embeddings", 4096);
  c.rms_norm_eps = static_cast<float>(r.number_or("rms_norm_eps", 1e-6));
  c.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  if (const auto* act = r.find("hidden_act"); act != nullptr && *act != "silu")
    return r.error("hidden_act " + act->dump() + " is not supported (only silu)");
  HELIUM_ASSIGN_OR_RETURN(c.rope, compute_rope_frequencies(r, c.head_dim));
  return c;
}

Result<DenseWeights> map_dense_weights(const DenseConfig& c, const WeightMap& map) {
  const int64_t h = c.hidden_size, q_dim = int64_t{c.n_heads} * c.head_dim,
                kv_dim = int64_t{c.n_kv_heads} * c.head_dim, inter = c.intermediate_size;
  DenseWeights w;
  HELIUM_ASSIGN_OR_RETURN(w.embed_tokens, map.get("model.embed_tokens.weight", {c.vocab_size, h}));
  HELIUM_ASSIGN_OR_RETURN(w.final_norm, map.get("model.norm.weight", {h}));
  if (!c.tied_embeddings) {
    HELIUM_ASSIGN_OR_RETURN(w.lm_head, map.get("lm_head.weight", {c.vocab_size, h}));
  }
  for (int i = 0; i < c.layers; ++i) {
    DenseLayerWeights l;
    auto get = [&](const char* suffix, std::vector<int64_t> shape, Tensor& out) -> Status {
      HELIUM_ASSIGN_OR_RETURN(out, map.get(layer_name(i, suffix), shape));
      return Status::ok();
    };
    HELIUM_RETURN_IF_ERROR(get("input_layernorm.weight", {h}, l.input_norm));
    HELIUM_RETURN_IF_ERROR(get("self_attn.q_proj.weight", {q_dim, h}, l.q_proj));
    HELIUM_RETURN_IF_ERROR(get("self_attn.k_proj.weight", {kv_dim, h}, l.k_proj));
    HELIUM_RETURN_IF_ERROR(get("self_attn.v_proj.weight", {kv_dim, h}, l.v_proj));
    HELIUM_RETURN_IF_ERROR(get("self_attn.o_proj.weight", {h, q_dim}, l.o_proj));
    if (c.qkv_bias) {
      HELIUM_RETURN_IF_ERROR(get("self_attn.q_proj.bias", {q_dim}, l.q_bias));
      HELIUM_RETURN_IF_ERROR(get("self_attn.k_proj.bias", {kv_dim}, l.k_bias));
      HELIUM_RETURN_IF_ERROR(get("self_attn.v_proj.bias", {kv_dim}, l.v_bias));
    }
    if (c.o_bias) HELIUM_RETURN_IF_ERROR(get("self_attn.o_proj.bias", {h}, l.o_bias));
    if (c.qk_norm) {
      HELIUM_RETURN_IF_ERROR(get("self_attn.q_norm.weight", {c.head_dim}, l.q_norm));
      HELIUM_RETURN_IF_ERROR(get("self_attn.k_norm.weight", {c.head_dim}, l.k_norm));
    }
    HELIUM_RETURN_IF_ERROR(get("post_attention_layernorm.weight", {h}, l.post_attention_norm));
    HELIUM_RETURN_IF_ERROR(get("mlp.gate_proj.weight", {inter, h}, l.gate_proj));
    HELIUM_RETURN_IF_ERROR(get("mlp.up_proj.weight", {inter, h}, l.up_proj));
    HELIUM_RETURN_IF_ERROR(get("mlp.down_proj.weight", {h, inter}, l.down_proj));
    if (c.mlp_bias) {
      HELIUM_RETURN_IF_ERROR(get("mlp.gate_proj.bias", {inter}, l.gate_bias));
      HELIUM_RETURN_IF_ERROR(get("mlp.up_proj.bias", {inter}, l.up_bias));
      HELIUM_RETURN_IF_ERROR(get("mlp.down_proj.bias", {h}, l.down_bias));
    }
    w.layers.push_back(l);
  }
  return w;
}

Result<std::unique_ptr<Model>> make_dense_transformer(DenseConfig config, DenseWeights host_weights,
                                                       const WeightMap& weights, Backend& backend,
                                                       const ModelOptions& options) {
  int64_t max_context = options.max_context > 0 ? options.max_context : config.max_context;
  if (options.max_rows <= 0) return Status::error("max_rows must be positive");
  auto model = std::make_unique<DenseTransformer>(std::move(config), backend, options.max_rows);
  HELIUM_RETURN_IF_ERROR(model->init(std::move(host_weights), weights, max_context, std::max(1, options.kv_page_size),
                                     options.kv_dtype, options.retune_kernels));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace helium
