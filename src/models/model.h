// models/model.h — what every model family offers the engine: one forward over a Batch of rows.
// Owns: Batch (DESIGN.md invariant 3), the Model interface, the family registry. Must not: read files
// directly (it gets a Checkpoint), call CUDA, sample, or manage KV pages (kv/ fills the Batch's layout).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "loader/checkpoint.h"

namespace helium {

// One forward pass: prefill, decode, batched decode and tree verification are all a Batch. Row i is a
// token at `positions[i]` of sequence `seq_ids[i]`; `parent_rows[i]` is the row it follows in a
// speculation tree (-1: it follows position - 1 of its sequence, already cached or an earlier row).
struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> seq_ids;
  std::vector<int32_t> parent_rows;
  std::vector<uint8_t> want_logits;  // rows whose logits the caller wants, returned in row order
  // Empty, or per row: -1 (the token is tokens[r]) or a logit row of the previous forward, which returned
  // argmax ids (ForwardOutputs::argmax), whose id is this row's token — read where the argmax was taken,
  // so that a greedy step may be queued before the previous one's id has come back (Model::collect).
  std::vector<int32_t> token_sources;

  // KV placement, filled by the KV cache (kv/); see AttentionLayout in backend/backend.h. Row r writes
  // its K/V to kv_write_slots[r] and attends to positions [0, prefix_lens[r]) of its sequence through
  // block table row_table[r] (block_tables holds n_tables tables of table_width page ids), then to the
  // batch rows set in tree_masks[r] (empty when the batch has no tree rows).
  int32_t page_size = 0;
  int32_t table_width = 0;
  int32_t n_tables = 0;
  std::vector<int32_t> block_tables;
  std::vector<int32_t> row_table;
  std::vector<int32_t> prefix_lens;
  std::vector<uint64_t> tree_masks;
  std::vector<int32_t> kv_write_slots;

  int32_t rows() const { return static_cast<int32_t>(tokens.size()); }
  // Appends a row; returns its index.
  int32_t add(int32_t token, int32_t position, int32_t seq_id, bool logits, int32_t parent_row = -1) {
    tokens.push_back(token);
    positions.push_back(position);
    seq_ids.push_back(seq_id);
    parent_rows.push_back(parent_row);
    want_logits.push_back(logits ? 1 : 0);
    return rows() - 1;
  }
  int32_t logit_rows() const {
    int32_t n = 0;
    for (uint8_t w : want_logits) n += w;
    return n;
  }
};

// The cache layout a model needs: per attention layer, K and V of `kv_dim` values per slot.
struct KvSpec {
  int layers = 0;
  int64_t kv_dim = 0;  // n_kv_heads * head_dim
};

// Per-layer KV storage in the backend's memory, (slots, kv_dim) each.
struct LayerKv {
  Tensor k, v;
};

struct ModelInfo {
  std::string family;  // the model_type, e.g. "qwen3"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t max_context = 0;  // max_position_embeddings
  int64_t parameters = 0;   // counted from the weights actually used
  int64_t weight_bytes = 0;
  std::string weight_dtype;
};

struct ModelOptions {
  int max_rows = 256;         // rows per forward; longer prompts are split by the engine
  int64_t max_context = 0;    // 0: the model's own
  int kv_page_size = 16;      // positions per KV page (sizes the block-table buffer)
  DType kv_dtype = DType::BF16;  // the KV cache's element type the caller will create (the backend tunes for it)
  bool retune_kernels = false;  // re-time the backend's kernel configurations instead of using its cache
};

// What forward() hands back for the rows with want_logits, in row order, in host memory; either part may
// be empty. `argmax` is each row's greedy token (Backend::argmax_rows: the largest logit, lowest id on
// ties, what sample_token picks for greedy settings), computed where the logits are, so that greedy
// decoding copies one id per row instead of a vocabulary of floats.
// Sampling candidates selected where the logits are (Backend::select_candidates), per logit row: a set
// holding the row's best top_k candidates (x = logit / temperature, id), and optionally the row's softmax
// total, for sample_from_candidates.
inline constexpr int kMaxCandidates = 2048;  // per row
struct CandidateOutputs {
  std::span<const float> temperature;  // logit_rows, > 0
  std::span<const int32_t> top_k;      // logit_rows, 1 .. Backend::kMaxSelectTopK
  std::span<float> x;                  // logit_rows × kMaxCandidates
  std::span<int32_t> ids;              // logit_rows × kMaxCandidates
  // logit_rows: the set's size; above kMaxCandidates the set did not fit (Model::last_logits gives the
  // row's logits).
  std::span<int32_t> count;
  std::span<int32_t> valid;  // logit_rows: the row's logits > -inf
  std::span<double> total;   // logit_rows: the row's softmax_total (core/softmax_terms.h), or empty
};

struct ForwardOutputs {
  std::span<float> logits;    // logit_rows × vocab_size, or empty (not written when candidates are asked for)
  std::span<int32_t> argmax;  // logit_rows, or empty
  std::optional<CandidateOutputs> candidates;
  // Argmax ids only (no logits or candidates): forward() returns once the step is queued, and `argmax` is
  // written when collect() returns for it (the buffer must live until then). A backend that runs eagerly
  // has written it already.
  bool deferred = false;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  virtual KvSpec kv_spec() const = 0;
  virtual int max_rows() const = 0;
  // Runs the batch (rows <= max_rows(), KV layout filled) and writes what `out` asks for of the rows with
  // want_logits.
  virtual Status forward(const Batch& batch, std::span<const LayerKv> kv, const ForwardOutputs& out) = 0;
  // The logits alone (logit_rows × vocab_size floats, host memory).
  Status forward(const Batch& batch, std::span<const LayerKv> kv, std::span<float> logits) {
    return forward(batch, kv, ForwardOutputs{logits, {}});
  }
  // The logits of logit row `row` of the last forward (vocab_size floats into `out`, host memory), for a
  // draw its candidates could not decide or a set that did not fit; they stay where they were computed
  // until the next forward.
  virtual Status last_logits(int row, std::span<float> out) = 0;
  // Waits for the oldest deferred forward not yet collected (ForwardOutputs::deferred): its argmax ids are
  // in the caller's buffer when this returns. Forwards are collected in the order they ran; with none
  // outstanding, returns at once.
  virtual Status collect() = 0;
};

// Builds the model of checkpoint.model_type on `backend` (weights imported, activations planned).
// An unknown model_type is an error naming it, the config file, and the supported families.
Result<std::unique_ptr<Model>> load_model(const Checkpoint& checkpoint, Backend& backend,
                                          const ModelOptions& options);
std::vector<std::string> supported_model_types();

}  // namespace helium
