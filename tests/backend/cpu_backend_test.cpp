// CpuBackend itself: ISA names and selection (HELIUM_CPU_ISA), memory, zero-copy weights, and the loud
// failure of every op on a broken precondition (death tests on the message check.h prints).
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "cpu_test_util.h"
#include "sample/sampler.h"

namespace helium::test {
namespace {

// Sets an environment variable for one scope and restores the previous value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty()) unsetenv(name_);
    else setenv(name_, old_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string old_;
};

TEST(CpuIsa, NamesRoundTrip) {
  for (CpuIsa isa : all_isas()) {
    Result<CpuIsa> parsed = parse_cpu_isa(cpu_isa_name(isa));
    ASSERT_TRUE(parsed.is_ok());
    EXPECT_EQ(*parsed, isa);
  }
  Result<CpuIsa> bad = parse_cpu_isa("avx9000");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.error_message().find("avx9000"), std::string::npos);
}

TEST(CpuIsa, DetectionIsConsistent) {
  const CpuIsa best = detect_cpu_isa();
  EXPECT_TRUE(cpu_supports(best));
  EXPECT_TRUE(cpu_supports(CpuIsa::Scalar));
  if (best == CpuIsa::Avx2) {
    EXPECT_FALSE(cpu_supports(CpuIsa::Avx512));
  }
}

TEST(CpuIsa, EnvironmentLowersTheDefault) {
  {
    ScopedEnv env("HELIUM_CPU_ISA", "scalar");
    Result<CpuIsa> isa = default_cpu_isa();
    ASSERT_TRUE(isa.is_ok());
    EXPECT_EQ(*isa, CpuIsa::Scalar);
    EXPECT_EQ(CpuBackend(1).isa(), CpuIsa::Scalar);
  }
  {
    ScopedEnv env("HELIUM_CPU_ISA", "sse9");
    Result<CpuIsa> isa = default_cpu_isa();
    ASSERT_FALSE(isa.is_ok());
    EXPECT_NE(isa.error_message().find("HELIUM_CPU_ISA"), std::string::npos) << isa.error_message();
    EXPECT_FALSE(CpuBackend::create(1).is_ok());
  }
  if (detect_cpu_isa() != CpuIsa::Avx512) {
    ScopedEnv env("HELIUM_CPU_ISA", "avx512");
    EXPECT_FALSE(default_cpu_isa().is_ok()) << "an ISA above the CPU's must be refused, not replaced";
  }
}

TEST(CpuIsa, UnsupportedExplicitIsaIsAnError) {
  if (detect_cpu_isa() == CpuIsa::Avx512) GTEST_SKIP() << "this CPU supports every CpuIsa";
  EXPECT_FALSE(CpuBackend::create(1, CpuIsa::Avx512).is_ok());
}

TEST(CpuBackendMemory, AllocateIsAlignedAndZeroCopyImport) {
  CpuBackend cpu(2, CpuIsa::Scalar);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{4096}, size_t{1000003}}) {
    Result<std::shared_ptr<DeviceBuffer>> buffer = cpu.allocate(bytes);
    ASSERT_TRUE(buffer.is_ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*buffer)->data()) % 64, 0u);
    EXPECT_EQ((*buffer)->bytes(), bytes);
  }
  std::vector<uint16_t> host(12);
  Result<Tensor> w = cpu.import_weight(Tensor(host.data(), DType::BF16, {3, 4}));
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(w->data, host.data());
  EXPECT_EQ(w->shape_string(), "(3, 4) BF16");
  std::vector<float> src = {1, 2, 3}, dst(3), back(3);
  cpu.copy_to_device(Tensor(dst.data(), DType::F32, {3}), src.data());
  cpu.copy_to_host(back.data(), Tensor(dst.data(), DType::F32, {3}));
  EXPECT_EQ(back, src);
  EXPECT_NE(cpu.name().find("scalar"), std::string::npos);
}

// argmax_rows is the sampler's greedy rule (sample_token with greedy settings), ties, NaN and signed
// zeros included, row by row.
TEST(CpuArgmaxRows, IsTheSamplersGreedyRule) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> rows = {
      {1, 3, 3, 2},     {nan, 5, 7},  {1, nan, 0.5f}, {-inf, -inf, -inf}, {-0.0f, 0.0f, -1}, {0.0f, -0.0f},
      {nan, nan, nan},  {-1, inf, inf}, {2},          {-5, -4, nan, -4},  {nan, -inf}};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-8, 8);
  for (int r = 0; r < 6; ++r) {
    std::vector<float> row(1000 + 333 * r);
    for (float& v : row) v = std::round(d(rng) * 4) / 4;  // quarter steps: many ties at the top
    rows.push_back(row);
  }
  CpuBackend cpu(2);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplerScratch scratch;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<float>& row = rows[i];
    int32_t got = -1;
    cpu.argmax_rows(Tensor(row.data(), DType::F32, {1, static_cast<int64_t>(row.size())}), Tensor(&got, DType::I32, {1}));
    EXPECT_EQ(got, sample_token(row, greedy, {}, 0, 0.5, scratch)) << "row " << i;
  }
  // Several rows in one call: each its own answer.
  std::vector<float> two = {1, 9, 9, 4, 7, 4};
  int32_t out[2] = {-1, -1};
  cpu.argmax_rows(Tensor(two.data(), DType::F32, {2, 3}), Tensor(out, DType::I32, {2}));
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], 1);
}

// Broken preconditions abort with "<op>: check failed: <condition>" and the shapes. Death tests fork a
// process that owns worker threads, hence the thread-safe style.
class CheckDeathTest : public CpuIsaTest {
 protected:
  void SetUp() override {
    CpuIsaTest::SetUp();
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

TEST_P(CheckDeathTest, MatmulShapesAndDtypes) {
  auto cpu = backend();
  std::vector<float> x(4 * 8), w(6 * 8), y(4 * 6), bias(5);
  EXPECT_DEATH(cpu->matmul(view(x, {4, 8}), view(w, {6, 7}), Tensor(), view(y, {4, 6})),
               "matmul: check failed: .*x's last dimension.*\\[x \\(4, 8\\) F32, w \\(6, 7\\) F32");
  EXPECT_DEATH(cpu->matmul(view(x, {4, 8}), view(w, {6, 8}), Tensor(), view(y, {3, 6})), "matmul: check failed");
  EXPECT_DEATH(cpu->matmul(view(x, {4, 8}), view(w, {6, 8}), view(bias, {5}), view(y, {4, 6})),
               "matmul: check failed.*bias");
  std::vector<int32_t> wi(6 * 8);
  EXPECT_DEATH(cpu->matmul(view(x, {4, 8}), view(wi, {6, 8}), Tensor(), view(y, {4, 6})), "w must be F32, F16 or BF16");
  EXPECT_DEATH(cpu->matmul(view(x, {4, 8}), view(w, {6, 8}), Tensor(), view(x, {4, 6})), "y overlaps an input");
}

TEST_P(CheckDeathTest, EmbeddingAndGatherIndices) {
  auto cpu = backend();
  std::vector<float> table(10 * 4), out(2 * 4);
  std::vector<int32_t> ids = {3, 10};
  EXPECT_DEATH(cpu->embedding(view(table, {10, 4}), view(ids, {2}), view(out, {2, 4})),
               "embedding: check failed.*ids\\[1\\] = 10 outside \\[0, 10\\)");
  ids = {-1, 0};
  EXPECT_DEATH(cpu->gather_rows(view(table, {10, 4}), view(ids, {2}), view(out, {2, 4})), "gather_rows: check failed");
}

TEST_P(CheckDeathTest, RmsNormRopeSwigluAdd) {
  auto cpu = backend();
  std::vector<float> x(3 * 8), w(7), y(3 * 8), inv_freq(4);
  std::vector<int32_t> pos(3);
  EXPECT_DEATH(cpu->rms_norm(view(x, {3, 8}), view(w, {7}), 1e-6f, false, view(y, {3, 8})), "rms_norm: check failed");
  EXPECT_DEATH(cpu->rope(view(x, {3, 8}), 1, view(pos, {3}), view(inv_freq, {4}), {8, 9, 1.0f}),
               "rope: check failed.*rot_dim 9");
  EXPECT_DEATH(cpu->rope(view(x, {3, 8}), 2, view(pos, {3}), view(inv_freq, {4}), {8, 8, 1.0f}), "rope: check failed");
  EXPECT_DEATH(cpu->swiglu(view(x, {3, 8}), view(w, {7}), view(y, {3, 8})), "swiglu: check failed");
  EXPECT_DEATH(cpu->add(view(x, {3, 8}), view(y, {4, 6}), view(y, {3, 8})), "add: check failed");
}

TEST_P(CheckDeathTest, KvWriteAndAttentionLayouts) {
  auto cpu = backend();
  const int64_t slots = 10, kv_dim = 8;
  std::vector<float> k_cache(slots * kv_dim), v_cache(slots * kv_dim), k(2 * kv_dim), v(2 * kv_dim);
  std::vector<uint16_t> v_bf16(slots * kv_dim);
  std::vector<int32_t> slot = {1, 10};
  EXPECT_DEATH(cpu->kv_write(view(k, {2, kv_dim}), view(v, {2, kv_dim}), view(slot, {2}), view(k_cache, {slots, kv_dim}),
                             view(v_cache, {slots, kv_dim})),
               "kv_write: check failed.*slots\\[1\\] = 10");
  slot = {1, 2};
  EXPECT_DEATH(cpu->kv_write(view(k, {2, kv_dim}), view(v, {2, kv_dim}), view(slot, {2}), view(k_cache, {slots, kv_dim}),
                             Tensor(v_bf16.data(), DType::BF16, {slots, kv_dim})),
               "kv_write: check failed.*must both be F32 or both BF16");

  std::vector<float> q(2 * 2 * 4), out(2 * 2 * 4);
  const AttentionShape shape{2, 2, 4, 0.5f};
  auto attend = [&](std::vector<int32_t> offsets, std::vector<int32_t> list, AttentionShape s) {
    cpu->attention(view(q, {2, 8}), view(k_cache, {slots, kv_dim}), view(v_cache, {slots, kv_dim}), s,
                   {view(offsets, {static_cast<int64_t>(offsets.size())}), view(list, {static_cast<int64_t>(list.size())})},
                   view(out, {2, 8}));
  };
  EXPECT_DEATH(attend({0, 1, 3}, {0, 1, 10}, shape), "attention: check failed.*slots\\[2\\] = 10");
  EXPECT_DEATH(attend({0, 0, 2}, {0, 1}, shape), "attention: check failed.*row 0 has slots \\[0, 0\\)");
  EXPECT_DEATH(attend({0, 1, 3}, {0, 1}, shape), "attention: check failed.*row 1");
  EXPECT_DEATH(attend({0, 1}, {0}, shape), "attention: check failed.*row_offsets");
  EXPECT_DEATH(attend({0, 1, 2}, {0, 1}, {3, 2, 4, 0.5f}), "attention: check failed.*multiple of n_kv_heads");
}

INSTANTIATE_TEST_SUITE_P(Isa, CheckDeathTest, testing::Values(CpuIsa::Scalar, detect_cpu_isa()), isa_param_name);

}  // namespace
}  // namespace helium::test
