// swiglu, add, embedding, gather_rows and kv_write against references: swiglu within a stated
// tolerance (it rounds through exp), the others exactly (they copy, convert exactly, or round once).
#include <cmath>
#include <vector>

#include "cpu_test_util.h"

namespace helium::test {
namespace {

class ElementwiseTest : public CpuIsaTest {};

// silu(g)·u = g / (1 + exp(-g)) · u: exp within 2 ulp (the SIMD polynomial; std::exp is better), then an
// add, a divide and a multiply, each one rounding: within 8 u of the exact value, relatively. Large |g|
// (where exp(-g) overflows or underflows) is included; there the exact result is g·u or a value below
// f32's smallest normal, hence the absolute floor of 1e-37.
TEST_P(ElementwiseTest, SwigluMatchesDoubleReference) {
  auto cpu = backend();
  std::mt19937 rng(41);
  for (int64_t n : {1, 3, 17, 257, 3072}) {
    for (int64_t rows : {1, 3, 13}) {
      std::vector<float> gate = random_floats(rng, rows * n, -12.0f, 12.0f);
      std::vector<float> up = random_floats(rng, rows * n, -2.0f, 2.0f);
      const float extremes[] = {0.0f, -0.0f, -87.0f, -88.5f, -100.0f, 87.0f, 89.0f, 100.0f, 1e-20f, -1e30f, 1e30f};
      for (size_t i = 0; i < sizeof(extremes) / sizeof(float) && i < gate.size(); ++i) gate[i] = extremes[i];
      std::vector<float> out(rows * n, NAN);
      cpu->swiglu(view(gate, {rows, n}), view(up, {rows, n}), view(out, {rows, n}));
      for (int64_t i = 0; i < rows * n; ++i) {
        const double g = gate[i];
        const double exact = g / (1.0 + std::exp(-g)) * up[i];
        ASSERT_LE(std::fabs(out[i] - exact), 8 * kF32Unit * std::fabs(exact) + 1e-37)
            << "n " << n << " i " << i << " gate " << g << " up " << up[i] << ": got " << out[i];
      }
    }
  }
}

TEST_P(ElementwiseTest, SwigluInPlace) {
  auto cpu = backend();
  std::mt19937 rng(42);
  std::vector<float> gate = random_floats(rng, 5 * 77, -6.0f, 6.0f), up = random_floats(rng, 5 * 77);
  std::vector<float> out(gate.size());
  cpu->swiglu(view(gate, {5, 77}), view(up, {5, 77}), view(out, {5, 77}));
  cpu->swiglu(view(gate, {5, 77}), view(up, {5, 77}), view(gate, {5, 77}));
  EXPECT_TRUE(same_bits(gate.data(), out.data(), out.size()));
}

TEST_P(ElementwiseTest, AddIsExactAndMayAlias) {
  auto cpu = backend(3);
  std::mt19937 rng(43);
  const int64_t rows = 67, n = 1000;
  std::vector<float> a = random_floats(rng, rows * n), b = random_floats(rng, rows * n), out(rows * n);
  cpu->add(view(a, {rows, n}), view(b, {rows, n}), view(out, {rows, n}));
  for (int64_t i = 0; i < rows * n; ++i) ASSERT_EQ(out[i], a[i] + b[i]) << i;
  cpu->add(view(a, {rows, n}), view(b, {rows, n}), view(a, {rows, n}));
  EXPECT_TRUE(same_bits(a.data(), out.data(), out.size()));
}

TEST_P(ElementwiseTest, EmbeddingConvertsExactly) {
  auto cpu = backend();
  std::mt19937 rng(44);
  const int64_t vocab = 300;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t dim : {1, 17, 1024}) {
      TypedData table(dtype, random_floats(rng, vocab * dim, -4.0f, 4.0f));
      std::vector<int32_t> ids = {0, 299, 5, 5, 150, 1, 298};
      const int64_t rows = static_cast<int64_t>(ids.size());
      std::vector<float> out(rows * dim, NAN);
      cpu->embedding(table.tensor({vocab, dim}), view(ids, {rows}), view(out, {rows, dim}));
      for (int64_t r = 0; r < rows; ++r)
        ASSERT_TRUE(same_bits(out.data() + r * dim, table.values.data() + ids[r] * dim, dim))
            << dtype_name(dtype) << " dim " << dim << " row " << r;
    }
  }
}

// embedding_from: a row with a source takes the id an earlier op left (previous[source]), the others their own.
TEST_P(ElementwiseTest, EmbeddingFromTakesTheSourcesIds) {
  auto cpu = backend();
  std::mt19937 rng(46);
  const int64_t vocab = 300, dim = 33;
  TypedData table(DType::BF16, random_floats(rng, vocab * dim, -4.0f, 4.0f));
  std::vector<int32_t> ids = {7, 0, 12, 0, 299}, sources = {-1, 2, -1, 0, -1}, previous = {41, 5, 250};
  std::vector<int32_t> taken = {7, 250, 12, 41, 299};
  const int64_t rows = static_cast<int64_t>(ids.size());
  std::vector<float> out(rows * dim, NAN), expected(rows * dim, NAN);
  cpu->embedding_from(table.tensor({vocab, dim}), view(ids, {rows}), view(sources, {rows}), view(previous, {3}),
                      view(out, {rows, dim}));
  cpu->embedding(table.tensor({vocab, dim}), view(taken, {rows}), view(expected, {rows, dim}));
  EXPECT_TRUE(same_bits(out.data(), expected.data(), expected.size()));
}

TEST_P(ElementwiseTest, GatherRowsCopiesRowsOfAnyDtype) {
  auto cpu = backend();
  std::mt19937 rng(45);
  const int64_t rows = 9, dim = 33;
  TypedData x(DType::BF16, random_floats(rng, rows * dim));
  std::vector<int32_t> index = {8, 0, 3, 3};
  TypedData out(DType::BF16, std::vector<float>(index.size() * dim, 0.0f));
  cpu->gather_rows(x.tensor({rows, dim}), view(index, {4}), out.tensor({4, dim}));
  for (size_t i = 0; i < index.size(); ++i)
    EXPECT_EQ(0, std::memcmp(out.bytes.data() + i * dim * 2, x.bytes.data() + index[i] * dim * 2, dim * 2)) << i;
  std::vector<float> xf = random_floats(rng, rows * dim), outf(2 * dim);
  std::vector<int32_t> last = {rows - 1, 2};
  cpu->gather_rows(view(xf, {rows, dim}), view(last, {2}), view(outf, {2, dim}));
  EXPECT_TRUE(same_bits(outf.data(), xf.data() + (rows - 1) * dim, dim));
  EXPECT_TRUE(same_bits(outf.data() + dim, xf.data() + 2 * dim, dim));
}

// kv_write writes exactly the listed slots, BF16 rounded to nearest even (core/dtype.h's f32_to_bf16,
// which matches torch), and leaves every other slot alone.
TEST_P(ElementwiseTest, KvWriteRoundsAndTouchesOnlyListedSlots) {
  auto cpu = backend();
  std::mt19937 rng(46);
  const int64_t cache_slots = 40, kv_dim = 72;
  for (DType dtype : {DType::F32, DType::BF16}) {
    const size_t bytes = cache_slots * kv_dim * dtype_bytes(dtype);
    std::vector<uint8_t> k_cache(bytes, 0xab), v_cache(bytes, 0xcd);
    std::vector<int32_t> slots = {39, 0, 17};
    std::vector<float> k = random_floats(rng, 3 * kv_dim, -100.0f, 100.0f), v = random_floats(rng, 3 * kv_dim);
    k[0] = NAN;
    k[1] = INFINITY;
    k[2] = 1.00390625f;  // halfway between two BF16 values: rounds to even
    cpu->kv_write(view(k, {3, kv_dim}), view(v, {3, kv_dim}), view(slots, {3}),
                  Tensor(k_cache.data(), dtype, {cache_slots, kv_dim}), Tensor(v_cache.data(), dtype, {cache_slots, kv_dim}));
    const size_t row_bytes = kv_dim * dtype_bytes(dtype);
    for (int64_t s = 0; s < cache_slots; ++s) {
      int r = -1;
      for (int i = 0; i < 3; ++i)
        if (slots[i] == s) r = i;
      for (int64_t d = 0; d < kv_dim; ++d) {
        if (r < 0) {
          ASSERT_EQ(k_cache[s * row_bytes], 0xab);
          ASSERT_EQ(v_cache[s * row_bytes + row_bytes - 1], 0xcd);
          continue;
        }
        if (dtype == DType::F32) {
          ASSERT_EQ(0, std::memcmp(&k_cache[s * row_bytes + d * 4], &k[r * kv_dim + d], 4)) << s << " " << d;
          ASSERT_EQ(0, std::memcmp(&v_cache[s * row_bytes + d * 4], &v[r * kv_dim + d], 4)) << s << " " << d;
        } else {
          uint16_t hk, hv;
          std::memcpy(&hk, &k_cache[s * row_bytes + d * 2], 2);
          std::memcpy(&hv, &v_cache[s * row_bytes + d * 2], 2);
          ASSERT_EQ(hk, f32_to_bf16(k[r * kv_dim + d])) << s << " " << d;
          ASSERT_EQ(hv, f32_to_bf16(v[r * kv_dim + d])) << s << " " << d;
        }
      }
    }
    if (dtype == DType::BF16) {
      uint16_t h;
      std::memcpy(&h, &k_cache[39 * row_bytes + 4], 2);
      EXPECT_EQ(h, 0x3f80);  // 1.00390625 -> 1.0 (even)
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, ElementwiseTest, testing::ValuesIn(all_isas()), isa_param_name);

}  // namespace
}  // namespace helium::test
