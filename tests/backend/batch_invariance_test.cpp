// Batch invariance (DESIGN.md invariant 2), bitwise: for every op and ISA, row i of an R-row call equals
// the same input row computed alone, for R = 1..64 and 1, 2 and 3 threads. The rows of each call are
// taken from a pool of 64 inputs starting at an offset that changes with R, so a given input lands at
// every position inside the kernels' row tiles.
#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

#include "cpu_test_util.h"

namespace helium::test {
namespace {

constexpr int64_t kPool = 64;

// run(backend, pool_rows, out): computes the op on the listed pool rows, out has pool_rows.size() * width.
using RunRows = std::function<void(CpuBackend&, const std::vector<int64_t>&, std::vector<float>&)>;

void expect_batch_invariant(CpuIsa isa, int64_t width, const std::vector<int64_t>& row_counts, const RunRows& run) {
  CpuBackend single(1, isa);
  std::vector<std::vector<float>> alone(kPool);
  for (int64_t i = 0; i < kPool; ++i) run(single, {i}, alone[i]);
  for (int threads : {1, 2, 3}) {
    CpuBackend cpu(threads, isa);
    for (int64_t rows : row_counts) {
      std::vector<int64_t> pool_rows(rows);
      const int64_t offset = (rows * 37) % kPool;
      for (int64_t i = 0; i < rows; ++i) pool_rows[i] = (offset + i) % kPool;
      std::vector<float> out;
      run(cpu, pool_rows, out);
      ASSERT_EQ(out.size(), static_cast<size_t>(rows * width));
      for (int64_t i = 0; i < rows; ++i)
        ASSERT_TRUE(same_bits(out.data() + i * width, alone[pool_rows[i]].data(), width))
            << "row " << i << " (input " << pool_rows[i] << ") of " << rows << " with " << threads
            << " threads differs from the row computed alone";
    }
  }
}

std::vector<int64_t> all_row_counts() {
  std::vector<int64_t> r(kPool);
  std::iota(r.begin(), r.end(), 1);
  return r;
}

// Copies the listed rows (of `width` elements) out of a pool.
template <class T>
std::vector<T> pick(const std::vector<T>& pool, const std::vector<int64_t>& rows, int64_t width) {
  std::vector<T> out;
  out.reserve(rows.size() * width);
  for (int64_t r : rows) out.insert(out.end(), pool.begin() + r * width, pool.begin() + (r + 1) * width);
  return out;
}

class BatchInvarianceTest : public CpuIsaTest {};

TEST_P(BatchInvarianceTest, Matmul) {
  std::mt19937 rng(51);
  for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
    // k = 1000 leaves a vector tail; n = 67 splits unevenly over threads and tiles.
    const int64_t k = 1000, n = 67;
    const std::vector<float> x = random_floats(rng, kPool * k);
    TypedData w(dtype, random_floats(rng, n * k));
    TypedData bias(DType::BF16, random_floats(rng, n));
    const std::vector<int64_t> counts =
        dtype == DType::BF16 ? all_row_counts() : std::vector<int64_t>{2, 3, 5, 8, 17, 64};
    expect_batch_invariant(GetParam(), n, counts, [&](CpuBackend& cpu, const std::vector<int64_t>& rows, std::vector<float>& out) {
      std::vector<float> xr = pick(x, rows, k);
      const int64_t r = static_cast<int64_t>(rows.size());
      out.assign(r * n, NAN);
      cpu.matmul(view(xr, {r, k}), w.tensor({n, k}), bias.tensor({n}), view(out, {r, n}));
    });
    if (HasFatalFailure()) return;
  }
}

// At k = 4096 a row block holds 32 rows, so calls of 33..64 rows span two blocks.
TEST_P(BatchInvarianceTest, MatmulAcrossRowBlocks) {
  std::mt19937 rng(52);
  const int64_t k = 4096, n = 35;
  const std::vector<float> x = random_floats(rng, kPool * k);
  TypedData w(DType::BF16, random_floats(rng, n * k));
  expect_batch_invariant(GetParam(), n, {1, 31, 32, 33, 63, 64},
                         [&](CpuBackend& cpu, const std::vector<int64_t>& rows, std::vector<float>& out) {
                           std::vector<float> xr = pick(x, rows, k);
                           const int64_t r = static_cast<int64_t>(rows.size());
                           out.assign(r * n, NAN);
                           cpu.matmul(view(xr, {r, k}), w.tensor({n, k}), Tensor(), view(out, {r, n}));
                         });
}

TEST_P(BatchInvarianceTest, RmsNorm) {
  std::mt19937 rng(53);
  const int64_t dim = 1000;
  const std::vector<float> x = random_floats(rng, kPool * dim, -3.0f, 3.0f);
  TypedData w(DType::BF16, random_floats(rng, dim));
  expect_batch_invariant(GetParam(), dim, all_row_counts(),
                         [&](CpuBackend& cpu, const std::vector<int64_t>& rows, std::vector<float>& out) {
                           out = pick(x, rows, dim);
                           const int64_t r = static_cast<int64_t>(rows.size());
                           cpu.rms_norm(view(out, {r, dim}), w.tensor({dim}), 1e-6f, true, view(out, {r, dim}));
                         });
}

TEST_P(BatchInvarianceTest, Rope) {
  std::mt19937 rng(54);
  const int heads = 3, head_dim = 80, rot_dim = 40;
  const int64_t width = heads * head_dim;
  const std::vector<float> x = random_floats(rng, kPool * width);
  std::vector<int32_t> positions(kPool);
  for (int32_t& p : positions) p = static_cast<int32_t>(rng() % 32768);
  std::vector<float> inv_freq(rot_dim / 2);
  for (int i = 0; i < rot_dim / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / rot_dim);
  expect_batch_invariant(GetParam(), width, all_row_counts(),
                         [&](CpuBackend& cpu, const std::vector<int64_t>& rows, std::vector<float>& out) {
                           out = pick(x, rows, width);
                           std::vector<int32_t> pos = pick(positions, rows, 1);
                           const int64_t r = static_cast<int64_t>(rows.size());
                           cpu.rope(view(out, {r, width}), heads, view(pos, {r}), view(inv_freq, {rot_dim / 2}),
                                    {head_dim, rot_dim, 1.1f});
                         });
}

TEST_P(BatchInvarianceTest, SwigluAndAdd) {
  std::mt19937 rng(55);
  const int64_t n = 77;  // not a multiple of any vector width: each row's tail sits elsewhere in a batch
  const std::vector<float> gate = random_floats(rng, kPool * n, -8.0f, 8.0f), up = random_floats(rng, kPool * n);
  expect_batch_invariant(GetParam(), n, all_row_counts(),
                         [&](CpuBackend& cpu, const std::vector<int64_t>& rows, std::vector<float>& out) {
                           std::vector<float> g = pick(gate, rows, n), u = pick(up, rows, n);
                           const int64_t r = static_cast<int64_t>(rows.size());
                           out.assign(r * n, NAN);
                           cpu.swiglu(view(g, {r, n}), view(u, {r, n}), view(out, {r, n}));
                           cpu.add(view(out, {r, n}), view(u, {r, n}), view(out, {r, n}));
                         });
}

TEST_P(BatchInvarianceTest, Embedding) {
  std::mt19937 rng(56);
  const int64_t vocab = 100, dim = 65;
  TypedData table(DType::F16, random_floats(rng, vocab * dim));
  std::vector<int32_t> ids(kPool);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % vocab);
  expect_batch_invariant(GetParam(), dim, all_row_counts(),
                         [&](CpuBackend& cpu, const std::vector<int64_t>& rows, std::vector<float>& out) {
                           std::vector<int32_t> id = pick(ids, rows, 1);
                           const int64_t r = static_cast<int64_t>(rows.size());
                           out.assign(r * dim, NAN);
                           cpu.embedding(table.tensor({vocab, dim}), view(id, {r}), view(out, {r, dim}));
                         });
}

// Each pool row attends to its own list: causal prefixes of one sequence, lists of other sequences,
// and tree rows (a prompt plus scattered ancestor slots). Lengths up to 200 cross several 64-key tiles.
void attention_invariance(CpuIsa isa, DType cache_dtype, int n_heads, int n_kv_heads, int head_dim) {
  std::mt19937 rng(57);
  const int64_t cache_slots = 400, kv_dim = int64_t{n_kv_heads} * head_dim, q_dim = int64_t{n_heads} * head_dim;
  std::vector<uint8_t> k_cache(cache_slots * kv_dim * dtype_bytes(cache_dtype));
  std::vector<uint8_t> v_cache(k_cache.size());
  {
    std::vector<float> k = random_floats(rng, cache_slots * kv_dim), v = random_floats(rng, cache_slots * kv_dim);
    std::vector<int32_t> all(cache_slots);
    std::iota(all.begin(), all.end(), 0);
    CpuBackend writer(1, CpuIsa::Scalar);
    writer.kv_write(view(k, {cache_slots, kv_dim}), view(v, {cache_slots, kv_dim}), view(all, {cache_slots}),
                    Tensor(k_cache.data(), cache_dtype, {cache_slots, kv_dim}),
                    Tensor(v_cache.data(), cache_dtype, {cache_slots, kv_dim}));
  }
  std::vector<std::vector<int32_t>> lists(kPool);
  for (int64_t i = 0; i < kPool; ++i) {
    const int64_t len = 1 + static_cast<int64_t>(rng() % 200);
    if (i % 3 == 0) {
      for (int64_t p = 0; p < len; ++p) lists[i].push_back(static_cast<int32_t>(p));  // one sequence's prefix
    } else {
      for (int64_t p = 0; p < len; ++p) lists[i].push_back(static_cast<int32_t>(rng() % cache_slots));
    }
  }
  const std::vector<float> q = random_floats(rng, kPool * q_dim, -3.0f, 3.0f);
  const AttentionShape shape{n_heads, n_kv_heads, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
  expect_batch_invariant(isa, q_dim, all_row_counts(),
                         [&](CpuBackend& cpu, const std::vector<int64_t>& rows, std::vector<float>& out) {
                           std::vector<float> qr = pick(q, rows, q_dim);
                           std::vector<int32_t> offsets = {0}, slots;
                           for (int64_t r : rows) {
                             slots.insert(slots.end(), lists[r].begin(), lists[r].end());
                             offsets.push_back(static_cast<int32_t>(slots.size()));
                           }
                           const int64_t r = static_cast<int64_t>(rows.size());
                           out.assign(r * q_dim, NAN);
                           const AttentionLayout layout{view(offsets, {r + 1}),
                                                       view(slots, {static_cast<int64_t>(slots.size())})};
                           cpu.attention(view(qr, {r, q_dim}), Tensor(k_cache.data(), cache_dtype, {cache_slots, kv_dim}),
                                         Tensor(v_cache.data(), cache_dtype, {cache_slots, kv_dim}), shape, layout,
                                         view(out, {r, q_dim}));
                         });
}

TEST_P(BatchInvarianceTest, AttentionBf16Cache) { attention_invariance(GetParam(), DType::BF16, 8, 2, 80); }
TEST_P(BatchInvarianceTest, AttentionF32Cache) { attention_invariance(GetParam(), DType::F32, 6, 6, 36); }

INSTANTIATE_TEST_SUITE_P(Isa, BatchInvarianceTest, testing::ValuesIn(all_isas()), isa_param_name);

}  // namespace
}  // namespace helium::test
