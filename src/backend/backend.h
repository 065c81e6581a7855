// backend/backend.h — the op interface that models are written against (DESIGN.md layer "backend").
// Owns: the Tensor view, the Backend interface (memory + a closed set of ops). Each backend lives in its
// own folder (cpu/, later cuda/, metal/) with one file per op of the same name in every backend.
// Must not: know about models, files, samplers or requests. Kernels never allocate, log, synchronise or
// read files: callers pass buffers (planned at load time) and the backend's stream.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace helium {

// A non-owning view of a row-major tensor in some backend's memory; shape is outermost first.
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  int rank = 0;
  std::array<int64_t, 4> shape{};

  Tensor() = default;
  Tensor(void* data_, DType dtype_, std::initializer_list<int64_t> dims) : data(data_), dtype(dtype_) {
    for (int64_t d : dims) shape[rank++] = d;
  }
  int64_t dim(int i) const { return shape[i < 0 ? rank + i : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[i];
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_bytes(dtype); }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // The first `rows` rows (outermost dimension) of this tensor.
  Tensor first_rows(int64_t rows) const {
    Tensor t = *this;
    t.shape[0] = rows;
    return t;
  }
  // Row `i` onward, keeping the other dimensions.
  Tensor rows_from(int64_t i) const {
    Tensor t = *this;
    t.data = static_cast<uint8_t*>(data) + static_cast<size_t>(i) * (bytes() / shape[0]);
    t.shape[0] -= i;
    return t;
  }
  std::string shape_string() const;
};

// Memory owned by a backend; freed when the last reference goes.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual void* data() = 0;
  virtual size_t bytes() const = 0;
};

// Rotary embedding parameters, host side; inv_freq is uploaded as an F32 tensor of rot_dim/2 values.
// x[..., i] and x[..., i + rot_dim/2] rotate together (NeoX / rotate_half style); dims >= rot_dim pass.
struct RopeParams {
  int head_dim = 0;
  int rot_dim = 0;                 // even, <= head_dim
  float attention_scaling = 1.0f;  // multiplies cos and sin (YaRN's mscale; 1 otherwise)
};

// Which KV-cache slots each row attends to. The cache is paged: slot = page * page_size + offset within
// the page. Row r attends, in increasing position, first to positions [0, prefix_lens[r]) of its
// sequence, found through block_tables[row_table[r]] (position p lives in page table[p / page_size] at
// offset p % page_size), then to the batch rows whose bits are set in tree_masks[r] (bit j = row j of this
// batch, j < 64, visited in increasing j, each at slot write_slots[j]). Linear rows (prefill, decode)
// use the prefix alone: their own K/V is written into their sequence's pages before attention. Tree rows
// (speculation) attend to the prefix up to their root, then to their ancestors and themselves.
// A step writes keys only at the last `rows` positions of any row's prefix and at tree write slots: the
// CUDA decode kernel loads every earlier position before it waits for the step's own K/V writes.
// All tensors live in the backend's memory. tree_masks may be empty (data == nullptr): no tree rows.
//
// row_offsets/slots is the same information as an explicit slot list per row (row r: slots[row_offsets[r]
// .. row_offsets[r + 1])), the form the CPU kernels read: callers leave it empty and the CPU backend
// derives it; its tests may pass it directly.
struct AttentionLayout {
  Tensor row_offsets;  // (rows + 1) I32, or empty
  Tensor slots;        // (total) I32, or empty

  int page_size = 0;
  Tensor block_tables;  // (tables, max_pages) I32: page ids
  Tensor row_table;     // (rows) I32
  Tensor prefix_lens;   // (rows) I32
  Tensor tree_masks;    // (rows) I64, bit j = batch row j; or empty
  Tensor write_slots;   // (rows) I32
  int32_t max_keys = 0;  // host-side bound on any row's key count (prefix + tree bits), for launch sizes
};

struct AttentionShape {
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // query head h uses kv head h / (n_heads / n_kv_heads)
  int head_dim = 0;
  float scale = 0.0f;  // softmax scale, usually 1/sqrt(head_dim)
};

// A weight matmul a model will run: y(rows, n) = x(rows, k) · w(n, k)ᵀ with w of `dtype`.
struct MatmulShape {
  int64_t n = 0, k = 0;
  DType dtype = DType::BF16;
};

// A recorded sequence of ops that can be replayed (a CUDA graph): replay runs the same kernels on the
// same buffers, so whatever changes between replays must be uploaded into those buffers first.
class OpGraph {
 public:
  virtual ~OpGraph() = default;
  virtual void replay() = 0;
};

// Memory bandwidth as measured on this device: the ceiling of a memory-bound decode step.
struct MemoryBandwidth {
  double bytes_per_second = 0;
  std::string method;  // what was timed, e.g. "device-to-device copy, bytes read + written"
};

// The op interface. All ops are enqueued on the backend's stream in call order; the CPU backend runs
// them eagerly. Activations are F32 unless stated. Row-major shapes are given per op.
// Batch invariance (DESIGN.md invariant 2): for every op, output row i depends only on input row i (and
// the weights/cache), with a reduction order fixed by the shapes, never by the row count or threads.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // Memory. Buffers are planned at load time; nothing below allocates.
  virtual Result<std::shared_ptr<DeviceBuffer>> allocate(size_t bytes) = 0;
  // Makes host memory (e.g. an mmapped weight) usable by ops. The CPU backend returns a view of `host`
  // itself (zero copy; the caller keeps it alive); a GPU backend copies into device memory it owns and
  // returns a view of that.
  virtual Result<Tensor> import_weight(const Tensor& host) = 0;
  virtual void copy_to_device(Tensor dst, const void* host) = 0;  // dst.bytes() bytes
  virtual void copy_to_host(void* host, const Tensor& src) = 0;   // src.bytes() bytes
  virtual void synchronize() = 0;
  // Points in the op stream, for a caller that queues the next step before reading this one's results:
  // mark() returns one after everything enqueued so far; wait_for(mark) returns once all of that has run
  // and the copy_to_host calls made before the mark have landed (later work may still be running).
  // synchronize() reaches every mark. The CPU backend runs eagerly, so its marks are always reached.
  virtual uint64_t mark() { return 0; }
  virtual void wait_for(uint64_t mark) { (void)mark; }
  // Whether ops return once queued, so that the host can run ahead of the device (CUDA) rather than after
  // the op has run (the CPU): where a caller gains from queueing the next step before reading this one's.
  virtual bool queues_work() const { return false; }

  // Times this device's memory (a second or so; allocates and frees its own buffers, so call it outside
  // any capture). Benchmarks divide it by the bytes a step reads to get their ceiling.
  virtual Result<MemoryBandwidth> measure_memory_bandwidth() { return Status::error(name() + ": no bandwidth measurement"); }

  // Graphs: between begin_capture() and end_capture() ops are recorded, not run. Backends without graphs
  // (the CPU) say so and callers run the ops directly. No copies or synchronisation inside a capture.
  virtual bool supports_graphs() const { return false; }

  // Chooses launch configurations for these matmul shapes, by timing candidates on this device, or
  // from a cache of an earlier choice for the same device, driver and shapes (retune: ignore the cache).
  // Backends with nothing to tune return ok. Call once at load, before any op.
  virtual Status tune_matmuls(const std::vector<MatmulShape>& shapes, bool retune) {
    (void)shapes;
    (void)retune;
    return Status::ok();
  }
  // Chooses decode attention's launch configuration for this attention shape, the model's hidden size (the
  // width of the projections timed around it) and KV cache type (element type, positions per page, positions
  // per sequence), the same way (retune: ignore the cache). Call once at load, after tune_matmuls, before
  // any op.
  virtual Status tune_attention(const AttentionShape& shape, int64_t hidden, DType kv_dtype, int page_size,
                                int64_t max_context, bool retune) {
    (void)shape, (void)hidden, (void)kv_dtype, (void)page_size, (void)max_context, (void)retune;
    return Status::ok();
  }
  virtual void begin_capture() {}
  virtual Result<std::unique_ptr<OpGraph>> end_capture() { return Status::error(name() + ": no graph support"); }

  // out(rows, dim) = table(vocab, dim)[ids(rows) I32]; table F32/F16/BF16.
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor out) = 0;
  // The same, with row r's id read from previous[sources[r]] where sources[r] >= 0 (an id an earlier op
  // wrote on the device, e.g. argmax_rows' output: the next decode step's token without a trip through
  // the host) and from ids[r] where it is -1. sources (rows) I32, previous I32.
  virtual void embedding_from(const Tensor& table, const Tensor& ids, const Tensor& sources, const Tensor& previous,
                              Tensor out) = 0;
  // y(rows, n) = x(rows, k) · w(n, k)ᵀ [+ bias(n)]; w F32/F16/BF16, f32 accumulation. bias may be empty.
  virtual void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y) = 0;
  // Several matmuls over one weight whose rows are their weights stacked (fused q/k/v or gate/up
  // projections, one pass over w): ys[i](rows, n_i) = x · w[o_i : o_i + n_i]ᵀ [+ bias[o_i : o_i + n_i]],
  // o_i = n_0 + ... + n_{i-1}, Σ n_i = w.shape[0]; at most kMaxMatmulSplits outputs. Each output is bitwise
  // what matmul() gives with w's rows [o_i, o_i + n_i) and that part of the bias (on the batch-invariant
  // decode path also what the whole stacked matmul gives); the default runs one matmul per output.
  static constexpr int kMaxMatmulSplits = 3;
  virtual void matmul_split(const Tensor& x, const Tensor& w, const Tensor& bias, std::span<const Tensor> ys);
  // y(rows, n) += x · wᵀ [+ bias]: a projection added into the residual stream. Bitwise what
  // matmul(x, w, bias, scratch) followed by add(y, scratch, y) gives, which is the default; `scratch`
  // (rows, n) F32 is the caller's buffer for paths that need it (a backend may leave it untouched).
  virtual void matmul_add(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor scratch, Tensor y);
  // Fused forms of the sequences a transformer layer runs, for backends that can do them in fewer passes
  // (the CUDA decode path applies the norm or the activation while it stages x, and writes no copy).
  // Each is bitwise the unfused sequence named, which is the default implementation — except after a
  // prepare_norm hint (below), whose handoff may change the normalising op's rounding.
  //   rms_norm_matmul_split: rms_norm(x, norm_w, eps, zero_centred) into xn_scratch (rows, k), then
  //     matmul_split(xn_scratch, w, bias, ys). xn_scratch may be left untouched.
  virtual void rms_norm_matmul_split(const Tensor& x, const Tensor& norm_w, float eps, bool zero_centred,
                                     Tensor xn_scratch, const Tensor& w, const Tensor& bias,
                                     std::span<const Tensor> ys);
  //   swiglu_matmul_add: swiglu(gate, up, gate), then matmul_add(gate, w, bias, scratch, y). gate may be
  //     left holding either its input or the activation.
  virtual void swiglu_matmul_add(Tensor gate, const Tensor& up, const Tensor& w, const Tensor& bias, Tensor scratch,
                                 Tensor y);
  //   swiglu_mlp_add: a gated MLP added into the residual stream x, with gate and up stacked in w_gate_up:
  //     rms_norm_matmul_split(x, norm_w, eps, zero_centred, xn_scratch, w_gate_up, gate_up_bias, {gate, up}),
  //     then swiglu_matmul_add(gate, up, w_down, down_bias, xn_scratch, x). gate and up (rows, inter) F32 are
  //     the caller's buffers, left holding anything.
  virtual void swiglu_mlp_add(Tensor x, const Tensor& norm_w, float eps, bool zero_centred, Tensor xn_scratch,
                              const Tensor& w_gate_up, const Tensor& gate_up_bias, Tensor gate, Tensor up,
                              const Tensor& w_down, const Tensor& down_bias);
  // A hint before an op that adds into the residual stream x (matmul_add, swiglu_mlp_add's down): the op
  // after it normalises x with norm_w (rms_norm_matmul_split, or swiglu_mlp_add's norm). A backend may have
  // the first op prepare the second's input; the second's results may then differ in rounding from the
  // unhinted sequence, never with the batch. Ignored by default.
  virtual void prepare_norm(const Tensor& x, const Tensor& norm_w, bool zero_centred) {
    (void)x;
    (void)norm_w;
    (void)zero_centred;
  }
  // A hint that w is read by an op soon after the next one (the next weight of a decode step): a backend
  // may have the next op pull the start of w toward the processor while it runs (the GPU's L2). `stacked`:
  // the reader walks w's `stacked` equal row blocks side by side (2 for stacked gate/up), each from its
  // start. Performance only; ignored by default.
  virtual void prefetch(const Tensor& w, int stacked = 1) {
    (void)w;
    (void)stacked;
  }
  //   qk_norm_rope_kv_write: with q(rows, n_heads · head_dim), k and v(rows, n_kv_heads · head_dim):
  //     when q_norm/k_norm are given (head_dim weights; both or neither), rms_norm of each head of q and k
  //     in place; then rope(q), rope(k) in place; then kv_write(k, v, slots, k_cache, v_cache).
  virtual void qk_norm_rope_kv_write(Tensor q, Tensor k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm,
                                     float eps, int n_heads, int n_kv_heads, const Tensor& positions,
                                     const Tensor& inv_freq, const RopeParams& rope, const Tensor& slots,
                                     Tensor k_cache, Tensor v_cache);
  //   qk_norm_rope_attention: qk_norm_rope_kv_write(q, k, v, q_norm, k_norm, eps, shape.n_heads,
  //     shape.n_kv_heads, positions, inv_freq, rope, layout.write_slots, k_cache, v_cache), then
  //     attention(q, k_cache, v_cache, shape, layout, out). layout.write_slots must be given (they are the
  //     rows' K/V slots); q and k may be left holding their inputs or the normalised, rotated values.
  virtual void qk_norm_rope_attention(Tensor q, Tensor k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm,
                                      float eps, const Tensor& positions, const Tensor& inv_freq, const RopeParams& rope,
                                      Tensor k_cache, Tensor v_cache, const AttentionShape& shape,
                                      const AttentionLayout& layout, Tensor out);
  //   rms_norm_qkv_attention: a transformer layer's attention from its input x, q/k/v stacked in w_qkv:
  //     rms_norm_matmul_split(x, norm_w, eps, false, xn_scratch, w_qkv, qkv_bias, {q, k, v}), then
  //     qk_norm_rope_attention(q, k, v, q_norm, k_norm, eps, positions, inv_freq, rope, k_cache, v_cache,
  //     shape, layout, out) (one eps for both norms). The same bits as the two ops, and the same rounding
  //     as rms_norm_matmul_split after a prepare_norm hint.
  virtual void rms_norm_qkv_attention(const Tensor& x, const Tensor& norm_w, float eps, Tensor xn_scratch,
                                      const Tensor& w_qkv, const Tensor& qkv_bias, Tensor q, Tensor k, Tensor v,
                                      const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
                                      const Tensor& inv_freq, const RopeParams& rope, Tensor k_cache, Tensor v_cache,
                                      const AttentionShape& shape, const AttentionLayout& layout, Tensor out);
  // Whether matmul_split() over stacked weights beats separate matmuls here (the model then stacks its
  // q/k/v and gate/up weights at load); a CPU keeps the mmapped weights as they are.
  virtual bool prefers_stacked_projections() const { return false; }
  // y(rows, dim) = x / rms(x) * w (zero_centred: * (1 + w)); w (dim) any float dtype. x may be viewed as
  // (rows * heads, head_dim) for per-head norms. y may alias x.
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, bool zero_centred, Tensor y) = 0;
  // In place on x(rows, heads * head_dim) with positions(rows) I32 and inv_freq(rot_dim/2) F32.
  virtual void rope(Tensor x, int heads, const Tensor& positions, const Tensor& inv_freq,
                    const RopeParams& params) = 0;
  // k_cache/v_cache(slots, n_kv_heads * head_dim)[slots(rows)] = k/v(rows, n_kv_heads * head_dim).
  virtual void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor k_cache,
                        Tensor v_cache) = 0;
  // out(rows, n_heads * head_dim) = softmax(q kᵀ · scale) v over the slots of each row (AttentionLayout).
  virtual void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                         const AttentionShape& shape, const AttentionLayout& layout, Tensor out) = 0;
  // out(rows, n) = silu(gate(rows, n)) * up(rows, n); out may alias gate.
  virtual void swiglu(const Tensor& gate, const Tensor& up, Tensor out) = 0;
  // out = a + b, elementwise, same shapes; out may alias a.
  virtual void add(const Tensor& a, const Tensor& b, Tensor out) = 0;
  // out(n, dim) = x(rows, dim)[index(n) I32].
  virtual void gather_rows(const Tensor& x, const Tensor& index, Tensor out) = 0;
  // out(rows) I32 = the index of each row's largest value of x(rows, n) F32, the lowest index among
  // equal ones; NaN is never larger than anything, and a NaN at index 0 (or a row of NaN) gives 0. This
  // is exactly the greedy rule of sample_token (sample/sampler.h), so greedy decoding can read one id per
  // row instead of the logits.
  virtual void argmax_rows(const Tensor& x, Tensor out) = 0;
  // Candidates for sampling, selected where the logits are (sample/sampler.h, sample_from_candidates):
  // for each row r of logits(rows, n) F32, with temperatures(rows) F32 (> 0) and top_k(rows) I32 (1 ..
  // kMaxSelectTopK), a set of (x = logit / temperature as a float division, id) over the logits > -inf
  // that holds every one ranked among the row's best top_k[r] (x desc, id asc), in any order and
  // possibly more, into x(rows, cap) F32 and ids(rows, cap) I32; count(rows) I32 the set's size (above
  // cap: the set did not fit, and x and ids hold part of it); valid(rows) I32 the row's logits > -inf;
  // totals(rows) F64, unless empty, the row's softmax total (core/softmax_terms.h softmax_total, the same
  // bits), which a draw without top_k needs. rows <= 64. The default reads the tensors in place (host
  // memory) and gives exactly the best top_k.
  static constexpr int kMaxSelectTopK = 256;
  virtual void select_candidates(const Tensor& logits, const Tensor& temperatures, const Tensor& top_k, Tensor x,
                                 Tensor ids, Tensor count, Tensor valid, Tensor totals);
  // x[dst[i]] = x[src[i]] for the rows of x (rows, dim), any dtype; src (n) and dst (n) I32, the dst rows
  // distinct and none of them a src row (moves accepted speculation KV into place).
  virtual void copy_rows(Tensor x, const Tensor& src, const Tensor& dst) = 0;
  // t = offset + scale * u, u uniform in [-1, 1) from splitmix64(seed ^ splitmix64(i)) for element i: the
  // same values on every backend (dummy weights: real shapes without weight files).
  virtual void fill_random(Tensor t, uint64_t seed, float offset, float scale) = 0;
};

}  // namespace helium
