// attention (and kv_write, which fills the caches) against a double-precision reference: GQA ratios 1, 2,
// 4 (and 8 with 16 heads), causal prefill with and without a cached prefix, long decode contexts, a
// speculation tree whose rows list a prompt plus their ancestors, F32 and BF16 caches, odd head dims.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cpu_test_util.h"

namespace helium::test {
namespace {

struct AttentionConfig {
  int n_heads, n_kv_heads, head_dim;
};

// A KV cache filled through kv_write, with the f32 values it holds (BF16-rounded for a BF16 cache).
struct Cache {
  int64_t slots, kv_dim;
  DType dtype;
  std::vector<uint8_t> k_bytes, v_bytes;
  std::vector<float> k, v;  // what the cache holds, as f32

  Tensor k_tensor() { return Tensor(k_bytes.data(), dtype, {slots, kv_dim}); }
  Tensor v_tensor() { return Tensor(v_bytes.data(), dtype, {slots, kv_dim}); }
};

Cache make_cache(CpuBackend& cpu, int64_t slots, int64_t kv_dim, DType dtype, std::mt19937& rng) {
  Cache c{slots, kv_dim, dtype, {}, {}, {}, {}};
  c.k_bytes.resize(slots * kv_dim * dtype_bytes(dtype));
  c.v_bytes.resize(c.k_bytes.size());
  std::vector<float> k = random_floats(rng, slots * kv_dim), v = random_floats(rng, slots * kv_dim);
  // Written in reverse slot order through kv_write, so the test also covers it.
  std::vector<int32_t> order(slots);
  std::iota(order.rbegin(), order.rend(), 0);
  std::vector<float> k_rows(k.size()), v_rows(v.size());
  for (int64_t r = 0; r < slots; ++r) {
    std::copy_n(k.begin() + order[r] * kv_dim, kv_dim, k_rows.begin() + r * kv_dim);
    std::copy_n(v.begin() + order[r] * kv_dim, kv_dim, v_rows.begin() + r * kv_dim);
  }
  cpu.kv_write(view(k_rows, {slots, kv_dim}), view(v_rows, {slots, kv_dim}), view(order, {slots}), c.k_tensor(),
               c.v_tensor());
  c.k.resize(k.size());
  c.v.resize(v.size());
  for (size_t i = 0; i < k.size(); ++i) {
    c.k[i] = round_to(dtype, k[i]);
    c.v[i] = round_to(dtype, v[i]);
  }
  return c;
}

// Reference softmax attention of one row and head, in double, or in plain f32 (scores, max, exp, sums in
// index order: the "naive implementation in the same precision" the tolerance is scaled by).
template <class Real>
void reference_head(const AttentionConfig& cfg, const Cache& c, int kv_head, const float* q,
                    const std::vector<int32_t>& list, float scale, Real* out) {
  const int64_t head_offset = int64_t{kv_head} * cfg.head_dim;
  std::vector<Real> s(list.size());
  Real m = -INFINITY;
  for (size_t j = 0; j < list.size(); ++j) {
    Real dot = 0;
    for (int d = 0; d < cfg.head_dim; ++d) dot += static_cast<Real>(q[d]) * c.k[list[j] * c.kv_dim + head_offset + d];
    s[j] = dot * static_cast<Real>(scale);
    m = std::max(m, s[j]);
  }
  Real l = 0;
  for (Real& sj : s) {
    sj = std::exp(sj - m);
    l += sj;
  }
  for (int d = 0; d < cfg.head_dim; ++d) {
    Real acc = 0;
    for (size_t j = 0; j < list.size(); ++j) acc += s[j] * c.v[list[j] * c.kv_dim + head_offset + d];
    out[d] = acc / l;
  }
}

// Runs attention for rows with the given slot lists and compares with the double reference. Tolerance in
// the manner of flash-attention's tests: the kernel's largest error may be at most 4 times that of the
// naive f32 implementation, plus 8 u of the largest |v| (a floor for outputs the naive version happens
// to get almost exact).
void check_attention(CpuBackend& cpu, const AttentionConfig& cfg, Cache& cache,
                     const std::vector<std::vector<int32_t>>& lists, uint32_t seed, const std::string& what) {
  std::mt19937 rng(seed);
  const int64_t rows = static_cast<int64_t>(lists.size());
  const int64_t q_dim = static_cast<int64_t>(cfg.n_heads) * cfg.head_dim;
  // Scores with a standard deviation of about 2: a peaked softmax, where a missing or extra key shows.
  std::vector<float> q = random_floats(rng, rows * q_dim, -3.0f, 3.0f);
  std::vector<int32_t> offsets = {0}, slots;
  for (const auto& list : lists) {
    slots.insert(slots.end(), list.begin(), list.end());
    offsets.push_back(static_cast<int32_t>(slots.size()));
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim));
  std::vector<float> out(rows * q_dim, NAN);
  const AttentionLayout layout{view(offsets, {rows + 1}), view(slots, {static_cast<int64_t>(slots.size())})};
  cpu.attention(view(q, {rows, q_dim}), cache.k_tensor(), cache.v_tensor(),
                {cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, scale}, layout, view(out, {rows, q_dim}));

  double kernel_error = 0.0, naive_error = 0.0, max_v = 0.0;
  for (float v : cache.v) max_v = std::max(max_v, static_cast<double>(std::fabs(v)));
  std::vector<double> exact(cfg.head_dim);
  std::vector<float> naive(cfg.head_dim);
  for (int64_t r = 0; r < rows; ++r) {
    for (int h = 0; h < cfg.n_heads; ++h) {
      const int kv_head = h / (cfg.n_heads / cfg.n_kv_heads);
      const float* qh = q.data() + r * q_dim + h * cfg.head_dim;
      reference_head<double>(cfg, cache, kv_head, qh, lists[r], scale, exact.data());
      reference_head<float>(cfg, cache, kv_head, qh, lists[r], scale, naive.data());
      for (int d = 0; d < cfg.head_dim; ++d) {
        const double got = out[r * q_dim + h * cfg.head_dim + d];
        ASSERT_FALSE(std::isnan(got)) << what << " row " << r << " head " << h << " d " << d;
        kernel_error = std::max(kernel_error, std::fabs(got - exact[d]));
        naive_error = std::max(naive_error, std::fabs(naive[d] - exact[d]));
      }
    }
  }
  EXPECT_LE(kernel_error, 4.0 * naive_error + 8.0 * kF32Unit * max_v)
      << what << ": kernel error " << kernel_error << ", naive f32 error " << naive_error;
}

// slot_of[p]: the cache slot holding logical position p; scattered, so nothing relies on contiguity.
std::vector<int32_t> scattered_slots(int64_t n, std::mt19937& rng) {
  std::vector<int32_t> s(n);
  std::iota(s.begin(), s.end(), 0);
  std::shuffle(s.begin(), s.end(), rng);
  return s;
}

std::vector<std::vector<int32_t>> causal_lists(const std::vector<int32_t>& slot_of, int64_t prefix, int64_t rows) {
  std::vector<std::vector<int32_t>> lists;
  for (int64_t r = 0; r < rows; ++r) lists.emplace_back(slot_of.begin(), slot_of.begin() + prefix + r + 1);
  return lists;
}

class AttentionTest : public testing::TestWithParam<std::tuple<CpuIsa, DType>> {
 protected:
  void SetUp() override { HELIUM_SKIP_IF_ISA_UNAVAILABLE(isa()); }
  CpuIsa isa() const { return std::get<0>(GetParam()); }
  DType cache_dtype() const { return std::get<1>(GetParam()); }
};

const AttentionConfig kConfigs[] = {
    {4, 4, 64},   // GQA ratio 1
    {8, 4, 128},  // ratio 2
    {8, 2, 20},   // ratio 4, head_dim not a multiple of any vector width
    {16, 8, 128}, // Qwen3-0.6B
    {4, 1, 256},  // ratio 4, head_dim over two output chunks
    {32, 2, 40},  // ratio 16: one pass per kv head at the pass limit
    {40, 2, 24},  // ratio 20: two passes of 10 heads
};

std::string config_name(const AttentionConfig& c) {
  return std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) + "x" + std::to_string(c.head_dim);
}

TEST_P(AttentionTest, CausalPrefill) {
  CpuBackend cpu(2, isa());
  std::mt19937 rng(31);
  for (const AttentionConfig& cfg : kConfigs) {
    const int64_t slots = 300;
    Cache cache = make_cache(cpu, slots, int64_t{cfg.n_kv_heads} * cfg.head_dim, cache_dtype(), rng);
    const std::vector<int32_t> slot_of = scattered_slots(slots, rng);
    check_attention(cpu, cfg, cache, causal_lists(slot_of, 0, 67), 32, "prefill " + config_name(cfg));
    // A second chunk of a prompt: 45 rows after 130 cached positions (tiles of 64 cross the boundary).
    check_attention(cpu, cfg, cache, causal_lists(slot_of, 130, 45), 33, "prefill after prefix " + config_name(cfg));
  }
}

TEST_P(AttentionTest, DecodeLongContexts) {
  CpuBackend cpu(2, isa());
  std::mt19937 rng(34);
  for (const AttentionConfig& cfg : {kConfigs[1], kConfigs[2], kConfigs[3]}) {
    const int64_t slots = 3100;
    Cache cache = make_cache(cpu, slots, int64_t{cfg.n_kv_heads} * cfg.head_dim, cache_dtype(), rng);
    const std::vector<int32_t> slot_of = scattered_slots(slots, rng);
    // One sequence at 3000 keys, then a batch of sequences at different lengths (sharing the cache).
    check_attention(cpu, cfg, cache, {std::vector<int32_t>(slot_of.begin(), slot_of.begin() + 3000)}, 35,
                    "decode 3000 " + config_name(cfg));
    std::vector<std::vector<int32_t>> batch;
    for (int64_t len : {1, 63, 64, 65, 1000, 3100})
      batch.emplace_back(slot_of.end() - len, slot_of.end());
    check_attention(cpu, cfg, cache, batch, 36, "decode batch " + config_name(cfg));
  }
}

// Tree verification: a 40-token prompt, then a draft tree whose nodes live in scratch slots. Each row
// lists the prompt, its ancestors (root first), then itself.
TEST_P(AttentionTest, TreeLayout) {
  CpuBackend cpu(2, isa());
  std::mt19937 rng(37);
  const int parent[] = {-1, 0, 0, 1, 1, 2, 5, 6, 6, 3};
  const int nodes = sizeof(parent) / sizeof(parent[0]);
  for (const AttentionConfig& cfg : {kConfigs[0], kConfigs[2], kConfigs[3]}) {
    const int64_t slots = 200;
    Cache cache = make_cache(cpu, slots, int64_t{cfg.n_kv_heads} * cfg.head_dim, cache_dtype(), rng);
    const std::vector<int32_t> slot_of = scattered_slots(slots, rng);
    const std::vector<int32_t> prompt(slot_of.begin(), slot_of.begin() + 40);
    std::vector<std::vector<int32_t>> lists;
    for (int node = 0; node < nodes; ++node) {
      std::vector<int32_t> path;
      for (int a = node; a >= 0; a = parent[a]) path.insert(path.begin(), slot_of[150 + a]);
      std::vector<int32_t> list = prompt;
      list.insert(list.end(), path.begin(), path.end());
      lists.push_back(list);
    }
    check_attention(cpu, cfg, cache, lists, 38, "tree " + config_name(cfg));
  }
}

INSTANTIATE_TEST_SUITE_P(IsaCache, AttentionTest,
                         testing::Combine(testing::ValuesIn(all_isas()), testing::Values(DType::F32, DType::BF16)),
                         [](const testing::TestParamInfo<std::tuple<CpuIsa, DType>>& param) {
                           return std::string(cpu_isa_name(std::get<0>(param.param))) + "_" +
                                  std::string(dtype_name(std::get<1>(param.param)));
                         });

}  // namespace
}  // namespace helium::test
