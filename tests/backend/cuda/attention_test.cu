// helium::cuda::attention against a double-precision reference built from the same paged layout: decode
// rows (split-KV path, rows <= 64) and prefill batches (tensor-core path, rows > 64), GQA ratios 1, 2, 4,
// 8, head dims 16..256 plus generic ones (24, 80), page sizes 16 and 64 with shuffled page ids, BF16 and
// F32 caches, speculation-tree rows; bitwise batch invariance (row i of an R-row call == the row alone)
// and tree invariance (a tree row == a linear row with the same keys stored elsewhere).
//
// Tolerances, in the manner of flash-attention's tests: the kernel's largest error against the double
// reference may be at most 4 times that of a naive implementation in the kernel's precision, plus a floor
// of 32 f32 units of the largest |v| (for outputs the naive version happens to get almost exact; device
// expf may be 2 ulp off where std::exp is not).
//  - decode path and the generic kernels compute in f32: the naive version is plain f32 (scores, max, exp,
//    sums in index order);
//  - the prefill tensor-core path rounds q, k, v and the probabilities p to bf16 (f32 accumulation, l
//    summed from the unrounded p): the naive version does the same roundings in index order.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ops.cuh"
#include "core/dtype.h"

namespace helium::test {
namespace {

constexpr double kF32Unit = 1.0 / (1 << 24);
constexpr int kMaxTestHeads = 16;
constexpr int kMaxTestHeadDim = 256;
constexpr int64_t kMaxTestContext = 34000;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Head dims the prefill kernel runs on tensor cores (the others take the f32 generic kernel); mirrors
// tuned_head_dim in attention.cu.
bool prefill_uses_bf16(int head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

float to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// Device memory owned by a test.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(size_t bytes) { HELIUM_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(bytes, 16))); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  DeviceMemory(DeviceMemory&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~DeviceMemory() {
    if (p_ != nullptr) cudaFree(p_);
  }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

template <class T>
DeviceMemory upload(const std::vector<T>& v) {
  DeviceMemory m(v.size() * sizeof(T));
  if (!v.empty()) {
    HELIUM_CUDA_CHECK(cudaMemcpy(m.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    HELIUM_CUDA_CHECK(cudaDeviceSynchronize());  // a pageable copy may return before it lands; kernels run on a non-blocking stream
  }
  return m;
}

// Runs fn(i) for i in [0, n) on all host cores (the references are the slow part of these tests).
void parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  const int workers = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::atomic<int64_t> next{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (int64_t i = next++; i < n; i = next++) fn(i);
    });
  for (auto& t : threads) t.join();
}

struct Shape {
  int n_heads, n_kv_heads, head_dim;
  DType kv_dtype;
  int page_size;

  int group() const { return n_heads / n_kv_heads; }
  int64_t q_dim() const { return int64_t{n_heads} * head_dim; }
  int64_t kv_dim() const { return int64_t{n_kv_heads} * head_dim; }
  std::string name() const {
    std::ostringstream s;
    s << "heads " << n_heads << "/" << n_kv_heads << " head_dim " << head_dim << " " << dtype_name(kv_dtype)
      << " page " << page_size;
    return s.str();
  }
};

// A paged KV cache with random contents (uniform in [-1, 1], BF16-rounded for a BF16 cache), block tables
// whose pages come from a shuffled pool (so no sequence is contiguous), and free slots for tree nodes.
class PagedCache {
 public:
  PagedCache(const Shape& shape, int64_t pages, uint32_t seed) : shape_(shape), rng_(seed) {
    slots_ = pages * shape.page_size;
    k_.resize(slots_ * shape.kv_dim());
    v_.resize(k_.size());
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : k_) x = store(dist(rng_));
    for (float& x : v_) x = store(dist(rng_));
    free_pages_.resize(pages);
    std::iota(free_pages_.begin(), free_pages_.end(), 0);
    std::shuffle(free_pages_.begin(), free_pages_.end(), rng_);
  }

  const Shape& shape() const { return shape_; }
  std::mt19937& rng() { return rng_; }

  // A new sequence of `length` positions; returns its table id.
  int add_sequence(int length) {
    std::vector<int32_t> table;
    for (int p = 0; p < length; p += shape_.page_size) table.push_back(take_page());
    tables_.push_back(std::move(table));
    return static_cast<int>(tables_.size()) - 1;
  }
  int64_t slot(int table, int position) const {
    return int64_t{tables_[table][position / shape_.page_size]} * shape_.page_size + position % shape_.page_size;
  }
  // A slot outside every sequence (where a speculation-tree node's K/V is written).
  int64_t free_slot() {
    if (scratch_left_ == 0) {
      scratch_page_ = take_page();
      scratch_left_ = shape_.page_size;
    }
    return int64_t{scratch_page_} * shape_.page_size + (shape_.page_size - scratch_left_--);
  }
  void copy_slot(int64_t dst, int64_t src) {
    const int64_t d = shape_.kv_dim();
    std::copy_n(k_.begin() + src * d, d, k_.begin() + dst * d);
    std::copy_n(v_.begin() + src * d, d, v_.begin() + dst * d);
  }
  const float* k_row(int64_t slot) const { return k_.data() + slot * shape_.kv_dim(); }
  const float* v_row(int64_t slot) const { return v_.data() + slot * shape_.kv_dim(); }
  double max_abs_v() const {
    double m = 0;
    for (float x : v_) m = std::max(m, static_cast<double>(std::fabs(x)));
    return m;
  }

  // Copies the cache and the tables (padded with -1: a kernel that reads past a table traps) to the device.
  void upload_all() {
    max_pages_ = 1;
    for (const auto& t : tables_) max_pages_ = std::max<int>(max_pages_, static_cast<int>(t.size()));
    std::vector<int32_t> flat(tables_.size() * max_pages_, -1);
    for (size_t t = 0; t < tables_.size(); ++t) std::copy(tables_[t].begin(), tables_[t].end(), flat.begin() + t * max_pages_);
    d_tables_ = upload(flat);
    if (shape_.kv_dtype == DType::F32) {
      d_k_ = upload(k_);
      d_v_ = upload(v_);
    } else {
      std::vector<uint16_t> kb(k_.size()), vb(v_.size());
      for (size_t i = 0; i < k_.size(); ++i) {
        kb[i] = f32_to_bf16(k_[i]);
        vb[i] = f32_to_bf16(v_[i]);
      }
      d_k_ = upload(kb);
      d_v_ = upload(vb);
    }
  }
  Tensor k_tensor() const { return Tensor(d_k_.get(), shape_.kv_dtype, {slots_, shape_.kv_dim()}); }
  Tensor v_tensor() const { return Tensor(d_v_.get(), shape_.kv_dtype, {slots_, shape_.kv_dim()}); }
  Tensor tables_tensor() const {
    return Tensor(d_tables_.get(), DType::I32, {static_cast<int64_t>(tables_.size()), max_pages_});
  }

 private:
  float store(float x) const { return shape_.kv_dtype == DType::BF16 ? to_bf16(x) : x; }
  int32_t take_page() {
    if (free_pages_.empty()) throw std::runtime_error("test cache out of pages");
    const int32_t p = free_pages_.back();
    free_pages_.pop_back();
    return p;
  }

  Shape shape_;
  std::mt19937 rng_;
  int64_t slots_ = 0;
  std::vector<float> k_, v_;
  std::vector<int32_t> free_pages_;
  std::vector<std::vector<int32_t>> tables_;
  int32_t scratch_page_ = -1;
  int scratch_left_ = 0;
  int max_pages_ = 1;
  DeviceMemory d_k_, d_v_, d_tables_;
};

// The rows of one attention call.
struct Rows {
  std::vector<int32_t> table, prefix, write_slot;
  std::vector<int64_t> mask;  // all zero: passed as an empty tensor
  std::vector<float> q;       // (rows, n_heads * head_dim)

  int count() const { return static_cast<int>(table.size()); }
  void add(int t, int prefix_len, int64_t tree_mask = 0, int64_t slot = 0) {
    table.push_back(t);
    prefix.push_back(prefix_len);
    mask.push_back(tree_mask);
    write_slot.push_back(static_cast<int32_t>(slot));
  }
  bool has_tree() const {
    return std::any_of(mask.begin(), mask.end(), [](int64_t m) { return m != 0; });
  }
  void random_q(const Shape& s, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    q.resize(count() * s.q_dim());
    for (float& x : q) x = dist(rng);
  }
  // Row r's keys in visiting order, as cache slots: the prefix through the table, then the tree bits.
  std::vector<int64_t> keys(const PagedCache& c, int r) const {
    std::vector<int64_t> k;
    for (int p = 0; p < prefix[r]; ++p) k.push_back(c.slot(table[r], p));
    for (int j = 0; j < 64; ++j)
      if ((static_cast<uint64_t>(mask[r]) >> j) & 1) k.push_back(write_slot[j]);
    return k;
  }
  int max_keys(const PagedCache& c) const {
    int m = 1;
    for (int r = 0; r < count(); ++r) m = std::max<int>(m, static_cast<int>(keys(c, r).size()));
    return m;
  }
  // Rows `order` of this batch, in that order (tree bits refer to batch rows: only for linear rows).
  Rows select(const std::vector<int>& order, const Shape& s) const {
    Rows out;
    for (int r : order) {
      out.add(table[r], prefix[r], 0, write_slot[r]);
      out.q.insert(out.q.end(), q.begin() + r * s.q_dim(), q.begin() + (r + 1) * s.q_dim());
    }
    return out;
  }
};

class CudaAttentionTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    HELIUM_CUDA_CHECK(cudaStreamCreate(&ctx_.stream));
    ctx_.max_rows = kMaxDecodeRows;
    ctx_.max_context = kMaxTestContext;
    ctx_.attention_scratch_floats =
        cuda::attention_scratch_floats(kMaxDecodeRows, kMaxTestHeads, kMaxTestHeadDim, kMaxTestContext);
    scratch_ = DeviceMemory(ctx_.attention_scratch_floats * sizeof(float));
    ctx_.attention_scratch = static_cast<float*>(scratch_.get());
  }
  void TearDown() override {
    if (ctx_.stream != nullptr) cudaStreamDestroy(ctx_.stream);
  }

  // One attention call; returns out (rows, n_heads * head_dim). max_keys 0: the rows' own maximum. Tree
  // masks are passed when a row has one, or (all zero) when `pass_masks` is set.
  std::vector<float> run(const PagedCache& c, const Rows& rows, int max_keys = 0, bool pass_masks = false) {
    const Shape& s = c.shape();
    const int64_t n = rows.count();
    DeviceMemory q = upload(rows.q), table = upload(rows.table), prefix = upload(rows.prefix);
    DeviceMemory mask = upload(rows.mask), slots = upload(rows.write_slot);
    DeviceMemory out(n * s.q_dim() * sizeof(float));
    HELIUM_CUDA_CHECK(cudaMemset(out.get(), 0xff, n * s.q_dim() * sizeof(float)));  // NaN: unwritten shows
    AttentionLayout layout;
    layout.page_size = s.page_size;
    layout.block_tables = c.tables_tensor();
    layout.row_table = Tensor(table.get(), DType::I32, {n});
    layout.prefix_lens = Tensor(prefix.get(), DType::I32, {n});
    if (rows.has_tree() || pass_masks) {
      layout.tree_masks = Tensor(mask.get(), DType::I64, {n});
      layout.write_slots = Tensor(slots.get(), DType::I32, {n});
    }
    layout.max_keys = max_keys > 0 ? max_keys : rows.max_keys(c);
    const AttentionShape shape{s.n_heads, s.n_kv_heads, s.head_dim, 1.0f / std::sqrt(static_cast<float>(s.head_dim))};
    cuda::attention(ctx_, Tensor(q.get(), DType::F32, {n, s.q_dim()}), c.k_tensor(), c.v_tensor(), shape, layout,
                    Tensor(out.get(), DType::F32, {n, s.q_dim()}));
    HELIUM_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    HELIUM_CUDA_CHECK(cudaGetLastError());
    std::vector<float> host(n * s.q_dim());
    HELIUM_CUDA_CHECK(cudaMemcpy(host.data(), out.get(), host.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  }

  cuda::Context ctx_;
  DeviceMemory scratch_;
};

// The double reference of one row and head, and the naive version in the kernel's precision (bf16 when
// `bf16` is set: q, k, v and p rounded to bf16, f32 sums; plain f32 otherwise). Rows without keys give 0.
void reference_head(const PagedCache& c, const std::vector<int64_t>& keys, const float* q, int kv_head, bool bf16,
                    double* exact, float* naive) {
  const Shape& s = c.shape();
  const int d_max = s.head_dim;
  const int64_t head_offset = int64_t{kv_head} * d_max;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d_max));
  const float scale_f = 1.0f / std::sqrt(static_cast<float>(d_max));
  const size_t n = keys.size();
  if (n == 0) {
    std::fill(exact, exact + d_max, 0.0);
    std::fill(naive, naive + d_max, 0.0f);
    return;
  }
  std::vector<double> se(n);
  std::vector<float> sn(n);
  double me = -INFINITY;
  float mn = -INFINITY;
  for (size_t j = 0; j < n; ++j) {
    const float* k = c.k_row(keys[j]) + head_offset;
    double de = 0;
    float dn = 0;
    for (int d = 0; d < d_max; ++d) {
      de += static_cast<double>(q[d]) * k[d];
      dn += bf16 ? to_bf16(q[d]) * to_bf16(k[d]) : q[d] * k[d];
    }
    se[j] = de * scale;
    sn[j] = dn * scale_f;
    me = std::max(me, se[j]);
    mn = std::max(mn, sn[j]);
  }
  double le = 0;
  float ln = 0;
  for (size_t j = 0; j < n; ++j) {
    se[j] = std::exp(se[j] - me);
    sn[j] = std::exp(sn[j] - mn);
    le += se[j];
    ln += sn[j];
  }
  for (int d = 0; d < d_max; ++d) {
    double ae = 0;
    float an = 0;
    for (size_t j = 0; j < n; ++j) {
      const float v = c.v_row(keys[j])[head_offset + d];
      ae += se[j] * v;
      an += bf16 ? to_bf16(sn[j]) * to_bf16(v) : sn[j] * v;
    }
    exact[d] = ae / le;
    naive[d] = an / ln;
  }
}

// Compares `out` with the reference over every row and head (see the tolerance note at the top).
void expect_matches_reference(const PagedCache& c, const Rows& rows, const std::vector<float>& out, bool bf16,
                              const std::string& what) {
  const Shape& s = c.shape();
  const int64_t n = rows.count(), q_dim = s.q_dim();
  std::vector<double> exact(n * q_dim);
  std::vector<float> naive(n * q_dim);
  parallel_for(n * s.n_heads, [&](int64_t i) {
    const int r = static_cast<int>(i / s.n_heads), h = static_cast<int>(i % s.n_heads);
    const int64_t at = r * q_dim + int64_t{h} * s.head_dim;
    reference_head(c, rows.keys(c, r), rows.q.data() + at, h / s.group(), bf16, exact.data() + at, naive.data() + at);
  });
  double kernel_error = 0, naive_error = 0;
  int64_t worst = 0;
  for (int64_t i = 0; i < n * q_dim; ++i) {
    const double e = std::fabs(out[i] - exact[i]);
    if (!(e <= kernel_error)) {  // NaN counts as the worst
      kernel_error = std::isnan(e) ? INFINITY : e;
      worst = i;
    }
    naive_error = std::max(naive_error, std::fabs(naive[i] - exact[i]));
  }
  const double bound = 4.0 * naive_error + 32.0 * kF32Unit * c.max_abs_v();
  const int64_t wr = worst / q_dim, wh = (worst % q_dim) / s.head_dim, wd = worst % s.head_dim;
  EXPECT_LE(kernel_error, bound) << what << " (" << s.name() << ", " << n << " rows): kernel error " << kernel_error
                                 << ", naive " << (bf16 ? "bf16" : "f32") << " error " << naive_error
                                 << "; worst at row " << wr << " (prefix " << rows.prefix[wr] << ", mask 0x"
                                 << std::hex << rows.mask[wr] << std::dec << ", keys " << rows.keys(c, wr).size()
                                 << ") head " << wh << " d " << wd << ": got " << out[worst] << ", exact "
                                 << exact[worst] << ", naive " << naive[worst];
}

// First bitwise difference between row a of `x` and row b of `y`, or "" when equal.
std::string bitwise_difference(const std::vector<float>& x, int a, const std::vector<float>& y, int b, const Shape& s) {
  const float* p = x.data() + a * s.q_dim();
  const float* q = y.data() + b * s.q_dim();
  if (std::memcmp(p, q, s.q_dim() * sizeof(float)) == 0) return "";
  for (int64_t i = 0; i < s.q_dim(); ++i) {
    uint32_t u, v;
    std::memcpy(&u, p + i, 4);
    std::memcpy(&v, q + i, 4);
    if (u != v) {
      std::ostringstream m;
      m << "head " << i / s.head_dim << " d " << i % s.head_dim << ": " << p[i] << " (0x" << std::hex << u << ") vs "
        << q[i] << " (0x" << v << ")";
      return m.str();
    }
  }
  return "";
}

// Shapes over GQA ratios 1, 4, 8, head dims 32..256 and both cache dtypes; page sizes alternate.
std::vector<Shape> decode_shapes() {
  std::vector<Shape> shapes;
  int i = 0;
  for (DType dtype : {DType::BF16, DType::F32})
    for (int group : {1, 4, 8})
      for (int head_dim : {32, 64, 128, 256}) shapes.push_back({2 * group, 2, head_dim, dtype, i++ % 2 ? 64 : 16});
  return shapes;
}

// Adds a speculation tree to `rows`: a prefix of `prefix_len` positions in a new sequence, then nodes with
// the given parents (-1: the root), each with its K/V at a free slot, attending to the prefix, its
// ancestors and itself. Returns the row index of node 0.
int add_tree(PagedCache& c, Rows& rows, int prefix_len, const std::vector<int>& parents) {
  const int table = c.add_sequence(prefix_len);
  const int first = rows.count();
  for (size_t node = 0; node < parents.size(); ++node) {
    int64_t mask = int64_t{1} << (first + node);
    for (int p = parents[node]; p >= 0; p = parents[p]) mask |= int64_t{1} << (first + p);
    rows.add(table, prefix_len, mask, c.free_slot());
  }
  return first;
}

const std::vector<int> kTreeParents = {-1, 0, 0, 1, 2, 2, 3, 6};  // depth up to 4

TEST_F(CudaAttentionTest, DecodeMatchesReference) {
  uint32_t seed = 1;
  for (const Shape& s : decode_shapes()) {
    PagedCache c(s, (kMaxTestContext + 9000) / s.page_size + 64, seed++);
    Rows rows;
    for (int context : {1, 5, 255, 256, 257, 3000, 33000}) rows.add(c.add_sequence(context), context);
    rows.add(c.add_sequence(0), 0);  // no keys: zeros
    add_tree(c, rows, 250, kTreeParents);  // nodes at positions 250..254 cross the 256-key partition boundary
    add_tree(c, rows, 0, {-1, 0});
    rows.random_q(s, c.rng());
    c.upload_all();
    expect_matches_reference(c, rows, run(c, rows), false, "decode");
  }
}

// The decode kernel's two K/V rings (Context::attention_ring: short, room for 128-key partitions, or wide,
// for 512) stage the same keys in the same order: bitwise the same output for rows of up to 128-key
// partitions, which either ring takes (a batch with a longer row takes the wide ring for every row, the
// same row alone the short one).
TEST_F(CudaAttentionTest, DecodeRingKeepsTheBits) {
  uint32_t seed = 50;
  for (const Shape& s : decode_shapes()) {
    PagedCache c(s, 12000 / s.page_size + 64, seed++);
    Rows rows;
    for (int context : {1, 64, 65, 300, 1024, 1025, 3000, 4096}) rows.add(c.add_sequence(context), context);
    add_tree(c, rows, 250, kTreeParents);
    rows.random_q(s, c.rng());
    c.upload_all();
    const std::vector<float> narrow = run(c, rows);
    ctx_.attention_ring = cuda::Context::kRingWide;
    const std::vector<float> wide = run(c, rows);
    ctx_.attention_ring = cuda::Context::kRingAuto;
    ASSERT_EQ(narrow.size(), wide.size());
    EXPECT_EQ(std::memcmp(narrow.data(), wide.data(), narrow.size() * sizeof(float)), 0) << s.name();
  }
}

// Rows of 2-16 partitions merged by the partition kernel's clusters (Context::attention_cluster_merge_max, off
// by default; the test turns it on):
// each linear row alone (a grid of that row's partitions, merged in clusters) bitwise the same row of the
// batch merged by the merge kernel, with the cluster path taken for every row of 2-16 partitions;
// rows of up to 2,048 keys (64- and 128-key partitions: 64 up to 1K here, so that 2K rows have 16) and a row
// without keys; then a speculation tree's rows (which refer to each other: a batch of their own) with and
// without the clusters. Then the same with the tiers moved so that 512-key partitions (the wide ring) merge
// in clusters too.
TEST_F(CudaAttentionTest, DecodeClusterMergeKeepsTheBits) {
  uint32_t seed = 70;
  for (const bool wide : {false, true}) {
    ctx_.attention_tiers = wide ? cuda::PartitionTiers{64, 128, 256} : cuda::PartitionTiers{1024, 4096, 16384};
    for (const Shape& s : decode_shapes()) {
      // Eight query heads a block leave no room for the partials beside the wide ring's accumulators.
      const bool clusters = !(wide && s.group() == 8);
      PagedCache c(s, 30000 / s.page_size + 64, seed++);
      Rows rows;
      const std::vector<int> contexts = wide ? std::vector<int>{300, 700, 2000, 5000, 8000}
                                             : std::vector<int>{0, 1, 63, 64, 65, 300, 1024, 1025, 2000, 2048};
      for (int context : contexts) rows.add(c.add_sequence(context), context);
      Rows tree;
      add_tree(c, tree, wide ? 1500 : 250, kTreeParents);
      rows.random_q(s, c.rng());
      tree.random_q(s, c.rng());
      c.upload_all();
      ctx_.attention_cluster_merge_max = 0;
      const std::vector<float> all = run(c, rows, 16384);  // past 16 partitions: the merge kernel
      expect_matches_reference(c, rows, all, false, "decode, merge kernel");
      const std::vector<float> tree_merged = run(c, tree);
      ctx_.attention_cluster_merge_max = 16;
      const int q_dim = s.q_dim();
      for (int r = 0; r < rows.count(); ++r) {
        const int keys = rows.prefix[r];
        const int64_t before = ctx_.attention_cluster_merges;
        const std::vector<float> alone = run(c, rows.select({r}, s));
        const int parts = cuda::partition_count(std::max(keys, 1), ctx_.attention_tiers);
        if (clusters && parts >= 2 && parts <= ctx_.attention_cluster_merge_max) {
          EXPECT_EQ(ctx_.attention_cluster_merges, before + 1) << s.name() << " row " << r << " (" << keys << " keys)";
        }
        EXPECT_EQ(std::memcmp(alone.data(), all.data() + r * q_dim, q_dim * sizeof(float)), 0)
            << s.name() << " row " << r << " (" << keys << " keys)";
      }
      const int64_t before = ctx_.attention_cluster_merges;
      const std::vector<float> tree_clusters = run(c, tree);
      if (clusters) {
        EXPECT_EQ(ctx_.attention_cluster_merges, before + 1) << s.name() << ", tree";
      }
      ASSERT_EQ(tree_clusters.size(), tree_merged.size());
      EXPECT_EQ(std::memcmp(tree_clusters.data(), tree_merged.data(), tree_merged.size() * sizeof(float)), 0)
          << s.name() << ", tree";
    }
  }
  ctx_.attention_tiers = {};
  ctx_.attention_cluster_merge_max = cuda::Context{}.attention_cluster_merge_max;
}

// Partitions of 512 keys (past PartitionTiers::large_end; here the tiers end early, so that short rows
// take every size): against the reference, with tree nodes across a 512-key boundary, and each row alone
// (the grid then covers only its own keys) bitwise as in the batch.
TEST_F(CudaAttentionTest, DecodeWidePartitionsMatchReference) {
  uint32_t seed = 60;
  ctx_.attention_tiers = {64, 128, 256};
  for (const Shape& s : decode_shapes()) {
    PagedCache c(s, 20000 / s.page_size + 64, seed++);
    Rows rows;
    for (int context : {1, 64, 65, 200, 257, 511, 512, 513, 1500, 5000}) rows.add(c.add_sequence(context), context);
    add_tree(c, rows, 510, kTreeParents);  // nodes at positions 510..514 cross the 512-key partition boundary
    rows.random_q(s, c.rng());
    c.upload_all();
    const std::vector<float> all = run(c, rows);
    expect_matches_reference(c, rows, all, false, "decode, 512-key partitions");
    const int q_dim = s.q_dim();
    for (int r = 0; r < 10; ++r) {  // the linear rows
      const std::vector<float> alone = run(c, rows.select({r}, s));
      EXPECT_EQ(std::memcmp(alone.data(), all.data() + r * q_dim, q_dim * sizeof(float)), 0)
          << s.name() << " row " << r << " (" << rows.prefix[r] << " keys)";
    }
  }
  ctx_.attention_tiers = {};
}

// 32-key partitions (PartitionTiers::tiny_end: none by default, HELIUM_CUDA_ATTN_PARTITIONS's four-number
// form) up to 1,536 keys, 64 beyond: against the reference, with tree nodes across a 32-key boundary, and
// each linear row alone (its own grid) bitwise as in the batch.
TEST_F(CudaAttentionTest, DecodeTinyPartitionsMatchReference) {
  uint32_t seed = 70;
  ctx_.attention_tiers = {2048, 4096, 16384, 1536};
  const std::vector<int> contexts = {1, 31, 32, 33, 100, 1025, 1536, 1537, 3000};
  for (const Shape& s : decode_shapes()) {
    PagedCache c(s, 12000 / s.page_size + 64, seed++);
    Rows rows;
    for (int context : contexts) rows.add(c.add_sequence(context), context);
    add_tree(c, rows, 30, kTreeParents);  // nodes at positions 30..34 cross a 32-key partition boundary
    rows.random_q(s, c.rng());
    c.upload_all();
    const std::vector<float> all = run(c, rows);
    expect_matches_reference(c, rows, all, false, "decode, 32-key partitions");
    for (int r = 0; r < static_cast<int>(contexts.size()); ++r) {
      const std::string diff = bitwise_difference(all, r, run(c, rows.select({r}, s)), 0, s);
      EXPECT_EQ(diff, "") << s.name() << " row " << r << " (" << rows.prefix[r] << " keys) vs alone";
    }
  }
  ctx_.attention_tiers = {};
}

// Generic kernels (head dims the tuned kernels do not cover) and odd GQA ratios.
TEST_F(CudaAttentionTest, DecodeGenericShapesMatchReference) {
  uint32_t seed = 100;
  for (const Shape& s : {Shape{2, 2, 24, DType::BF16, 16}, Shape{6, 2, 80, DType::F32, 64}, Shape{6, 2, 16, DType::BF16, 16},
                         Shape{4, 2, 16, DType::F32, 64}, Shape{16, 1, 64, DType::BF16, 16},
                         Shape{4, 2, 18, DType::F32, 16}}) {  // 18: the merge one dim per thread
    PagedCache c(s, 12000 / s.page_size + 64, seed++);
    Rows rows;
    for (int context : {1, 7, 256, 700, 5000}) rows.add(c.add_sequence(context), context);
    add_tree(c, rows, 510, kTreeParents);
    rows.random_q(s, c.rng());
    c.upload_all();
    expect_matches_reference(c, rows, run(c, rows), false, "decode (generic shapes)");
  }
}

// 64 decode rows: accuracy, then row i of an R-row call (R = 1..64, random rows in random order) against
// the same row alone, bitwise; the alone calls also use a smaller grid (max_keys = the row's own count).
TEST_F(CudaAttentionTest, DecodeBatchInvariance) {
  for (const Shape& s : {Shape{8, 2, 128, DType::BF16, 16}, Shape{16, 2, 64, DType::F32, 64}, Shape{2, 2, 24, DType::BF16, 16}}) {
    SCOPED_TRACE(s.name());
    PagedCache c(s, 150000 / s.page_size, 7);
    std::uniform_int_distribution<int> length(1, 3000);
    // Some rows share a sequence (as the rows of a short prompt chunk do), others have their own.
    std::vector<int> shared_tables, shared_lengths;
    for (int i = 0; i < 6; ++i) {
      shared_lengths.push_back(length(c.rng()));
      shared_tables.push_back(c.add_sequence(shared_lengths.back()));
    }
    Rows rows;
    for (int r = 0; r < kMaxDecodeRows; ++r) {
      if (r % 3 == 0) {
        const int seq = r % 6;
        rows.add(shared_tables[seq], std::uniform_int_distribution<int>(1, shared_lengths[seq])(c.rng()));
      } else {
        const int len = length(c.rng());
        rows.add(c.add_sequence(len), len);
      }
    }
    rows.random_q(s, c.rng());
    c.upload_all();
    const int max_keys = 4096;
    const std::vector<float> all = run(c, rows, max_keys);
    expect_matches_reference(c, rows, all, false, "64 decode rows");

    std::vector<std::vector<float>> alone(kMaxDecodeRows);
    for (int r = 0; r < kMaxDecodeRows; ++r) alone[r] = run(c, rows.select({r}, s));
    for (int r = 0; r < kMaxDecodeRows; ++r) {
      const std::string diff = bitwise_difference(all, r, alone[r], 0, s);
      EXPECT_EQ(diff, "") << "row " << r << " of 64 vs alone (prefix " << rows.prefix[r] << ")";
    }
    std::mt19937 pick(11);
    for (int count = 1; count <= kMaxDecodeRows; ++count) {
      std::vector<int> order(kMaxDecodeRows);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), pick);
      order.resize(count);
      const std::vector<float> out = run(c, rows.select(order, s), max_keys);
      for (int i = 0; i < count; ++i) {
        const std::string diff = bitwise_difference(out, i, alone[order[i]], 0, s);
        EXPECT_EQ(diff, "") << "row " << i << " of " << count << " (batch row " << order[i] << ", prefix "
                            << rows.prefix[order[i]] << ") vs alone";
      }
    }
  }
}

// A tree row (prefix up to the root, then ancestors and itself at write slots) against a linear row whose
// table holds copies of the same K/V at the same positions, in other slots: bitwise equal.
TEST_F(CudaAttentionTest, TreeRowsMatchLinearRowsBitwise) {
  uint32_t seed = 200;
  for (const Shape& s : {Shape{8, 2, 128, DType::BF16, 16}, Shape{16, 2, 64, DType::F32, 64}, Shape{2, 2, 256, DType::BF16, 64},
                         Shape{4, 2, 24, DType::BF16, 16}, Shape{8, 2, 32, DType::F32, 16}}) {
    for (int prefix_len : {0, 1, 250, 256, 1000, 4000}) {
      const std::string what = s.name() + ", prefix " + std::to_string(prefix_len);
      PagedCache c(s, 9 * (prefix_len + 16) / s.page_size + 64, seed++);
      Rows rows;
      const int first = add_tree(c, rows, prefix_len, kTreeParents);
      const int nodes = static_cast<int>(kTreeParents.size());
      for (int node = 0; node < nodes; ++node) {
        std::vector<int> chain;  // root .. node
        for (int p = node; p >= 0; p = kTreeParents[p]) chain.insert(chain.begin(), p);
        const int length = prefix_len + static_cast<int>(chain.size());
        const int table = c.add_sequence(length);
        for (int pos = 0; pos < prefix_len; ++pos) c.copy_slot(c.slot(table, pos), c.slot(rows.table[first], pos));
        for (size_t i = 0; i < chain.size(); ++i)
          c.copy_slot(c.slot(table, prefix_len + static_cast<int>(i)), rows.write_slot[first + chain[i]]);
        rows.add(table, length);
      }
      rows.random_q(s, c.rng());
      std::copy_n(rows.q.begin() + first * s.q_dim(), nodes * s.q_dim(), rows.q.begin() + (first + nodes) * s.q_dim());
      c.upload_all();
      const std::vector<float> out = run(c, rows);
      for (int node = 0; node < nodes; ++node) {
        const std::string diff = bitwise_difference(out, first + node, out, first + nodes + node, s);
        EXPECT_EQ(diff, "") << what << ": tree node " << node << " vs its linear row";
      }
      expect_matches_reference(c, rows, out, false, "tree and linear rows, " + what);
    }
  }
}

// Prefill batches (rows > 64): a fresh prompt; prompt chunks of several sequences after cached prefixes,
// with decode-like single rows; the same rows shuffled (no block holds consecutive rows of one sequence);
// and the smallest prefill batch, 65 rows.
TEST_F(CudaAttentionTest, PrefillMatchesReference) {
  uint32_t seed = 300;
  for (const Shape& s : {Shape{8, 2, 128, DType::BF16, 16}, Shape{1, 1, 64, DType::F32, 64}, Shape{8, 1, 256, DType::BF16, 64},
                         Shape{4, 1, 32, DType::BF16, 16}, Shape{2, 1, 16, DType::F32, 16}, Shape{1, 1, 24, DType::BF16, 16},
                         Shape{2, 1, 80, DType::F32, 64}}) {
    const bool bf16 = prefill_uses_bf16(s.head_dim);
    PagedCache c(s, 9000 / s.page_size + 64, seed++);
    auto prompt = [](Rows& rows, int table, int first_position, int count) {
      for (int p = first_position; p < first_position + count; ++p) rows.add(table, p + 1);
    };
    Rows fresh;
    prompt(fresh, c.add_sequence(600), 0, 600);
    Rows chunks;
    prompt(chunks, c.add_sequence(1150), 1000, 150);
    prompt(chunks, c.add_sequence(300), 0, 300);
    prompt(chunks, c.add_sequence(87), 37, 50);
    chunks.add(c.add_sequence(3000), 3000);
    chunks.add(c.add_sequence(1), 1);
    chunks.add(c.add_sequence(700), 700);
    Rows smallest;
    prompt(smallest, c.add_sequence(65), 0, 65);
    fresh.random_q(s, c.rng());
    chunks.random_q(s, c.rng());
    smallest.random_q(s, c.rng());
    std::vector<int> order(chunks.count());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), c.rng());
    const Rows shuffled = chunks.select(order, s);
    c.upload_all();
    expect_matches_reference(c, fresh, run(c, fresh), bf16, "prefill, one fresh prompt of 600 rows");
    const std::vector<float> chunk_out = run(c, chunks);
    expect_matches_reference(c, chunks, chunk_out, bf16, "prefill, chunks of three sequences and three single rows");
    expect_matches_reference(c, shuffled, run(c, shuffled), bf16, "prefill, the same rows shuffled");
    expect_matches_reference(c, smallest, run(c, smallest, 0, true), bf16, "prefill, 65 rows (all-zero tree masks)");
  }
}

// Host-side checks abort naming the op (no GPU needed: they fail before any launch).
TEST(CudaAttentionChecks, BadCallsAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  void* fake = reinterpret_cast<void*>(uintptr_t{1} << 20);
  cuda::Context ctx;
  const AttentionShape shape{4, 2, 64, 0.125f};
  auto layout_for = [&](int64_t rows, bool tree) {
    AttentionLayout l;
    l.page_size = 16;
    l.block_tables = Tensor(fake, DType::I32, {1, 8});
    l.row_table = Tensor(fake, DType::I32, {rows});
    l.prefix_lens = Tensor(fake, DType::I32, {rows});
    if (tree) {
      l.tree_masks = Tensor(fake, DType::I64, {rows});
      l.write_slots = Tensor(fake, DType::I32, {rows});
    }
    l.max_keys = 128;
    return l;
  };
  const Tensor cache(fake, DType::BF16, {128, 128});
  auto q = [&](int64_t rows) { return Tensor(fake, DType::F32, {rows, 256}); };
  auto out = [&](int64_t rows) { return Tensor(reinterpret_cast<void*>(uintptr_t{1} << 40), DType::F32, {rows, 256}); };
  AttentionLayout no_bound = layout_for(4, true);
  no_bound.max_keys = 0;
  EXPECT_DEATH(cuda::attention(ctx, q(4), cache, cache, shape, no_bound, out(4)), "max_keys");
  EXPECT_DEATH(cuda::attention(ctx, q(4), cache, Tensor(fake, DType::F32, {128, 128}), shape, layout_for(4, false), out(4)),
               "attention");
  EXPECT_DEATH(cuda::attention(ctx, q(4), cache, cache, AttentionShape{4, 3, 64, 0.125f}, layout_for(4, false), out(4)),
               "attention");
  EXPECT_DEATH(cuda::attention(ctx, q(4), cache, cache, shape, layout_for(4, false), out(4)),
               "attention_scratch");  // decode without scratch
}

}  // namespace
}  // namespace helium::test
