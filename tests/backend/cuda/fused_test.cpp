// tests/backend/cuda/fused_test.cpp — the CUDA backend's fused ops (backend.h: rms_norm_matmul_split,
// swiglu_matmul_add, swiglu_mlp_add, qk_norm_rope_kv_write, qk_norm_rope_attention, rms_norm_qkv_attention)
// are bitwise the unfused sequences they stand for (a norm handoff, prepare_norm: within the split's
// precision, and batch-invariant; attention's split for o_proj: bitwise), on the
// decode path (rows <= kMaxDecodeRows, where the kernels fuse) and past it (where they fall back), and
// with the environment's programmatic dependent launch on or off; and the backend's environment switches
// refuse malformed values by name. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ops.cuh"
#include "core/dtype.h"
#include "core/softmax_terms.h"
#include "sample/sampler.h"

namespace helium::test {
namespace {

// values as `dtype`'s bytes: BF16 rounded to nearest even, anything else as F32.
std::vector<uint8_t> encode(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * (dtype == DType::BF16 ? 2 : 4));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::BF16) {
      const uint16_t h = f32_to_bf16(values[i]);
      std::memcpy(&bytes[2 * i], &h, 2);
    } else {
      std::memcpy(&bytes[4 * i], &values[i], 4);
    }
  }
  return bytes;
}

// A device tensor of backend `b` holding `values` as `dtype`, its buffer kept alive in `keep`.
Tensor upload_to(Backend& b, std::vector<std::shared_ptr<DeviceBuffer>>& keep, const std::vector<float>& values,
                 DType dtype, std::initializer_list<int64_t> shape) {
  Tensor t(nullptr, dtype, shape);
  auto buffer = b.allocate(t.bytes());
  EXPECT_TRUE(buffer.is_ok());
  t.data = (*buffer)->data();
  keep.push_back(*buffer);
  std::vector<uint8_t> bytes = encode(values, dtype);
  bytes.resize(t.bytes());  // zeros of a wider dtype (I64, F64): the rest of their bytes zero
  b.copy_to_device(t, bytes.data());
  return t;
}

class CudaFusedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    create_backend();
  }
  // The fixture's backend, made again with the environment variable `name` set to `value` (before any
  // tensor of the test is made).
  void create_backend(const char* name = nullptr, const char* value = nullptr) {
    if (name != nullptr) setenv(name, value, 1);
    CudaBackendOptions options;
    options.max_rows = 96;
    options.max_context = 4096;
    options.max_k = 4096;
    auto created = CudaBackend::create(options);
    if (name != nullptr) unsetenv(name);
    ASSERT_TRUE(created.is_ok()) << created.status().message();
    backend_ = std::move(created).value();
  }

  // A device tensor holding `values` as `dtype` (kept alive by the fixture).
  Tensor upload(const std::vector<float>& values, DType dtype, std::initializer_list<int64_t> shape) {
    return upload_to(*backend_, buffers_, values, dtype, shape);
  }
  Tensor zeros(std::initializer_list<int64_t> shape, DType dtype = DType::F32) {
    Tensor t(nullptr, dtype, shape);
    return upload(std::vector<float>(static_cast<size_t>(t.numel()), 0.0f), dtype, shape);
  }
  // A device I32 tensor holding `values`.
  Tensor ints(const std::vector<int32_t>& values, std::initializer_list<int64_t> shape) {
    const Tensor t = zeros(shape, DType::I32);
    backend_->copy_to_device(t, values.data());
    return t;
  }
  // The layout of `rows` decode rows, row r reading table r (tables: rows × max_pages page ids).
  AttentionLayout decode_layout(int page, int64_t rows, int64_t max_pages, const std::vector<int32_t>& tables,
                                const std::vector<int32_t>& row_table, const std::vector<int32_t>& prefix,
                                const std::vector<int32_t>& write_slots) {
    AttentionLayout layout;
    layout.page_size = page;
    layout.block_tables = ints(tables, {rows, max_pages});
    layout.row_table = ints(row_table, {rows});
    layout.prefix_lens = ints(prefix, {rows});
    layout.write_slots = ints(write_slots, {rows});
    layout.max_keys = *std::max_element(prefix.begin(), prefix.end());
    return layout;
  }
  std::vector<uint8_t> download(const Tensor& t) {
    std::vector<uint8_t> out(t.bytes());
    backend_->copy_to_host(out.data(), t);
    backend_->synchronize();
    return out;
  }

  std::unique_ptr<CudaBackend> backend_;
  std::vector<std::shared_ptr<DeviceBuffer>> buffers_;
};

std::vector<float> random_reals(std::mt19937& rng, size_t count, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = d(rng);
  return v;
}

// Index of the first differing 4-byte word, or -1.
int64_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i + 4 <= a.size(); i += 4)
    if (std::memcmp(&a[i], &b[i], 4) != 0) return static_cast<int64_t>(i / 4);
  return -1;
}

TEST_F(CudaFusedTest, RmsNormMatmulSplitIsNormThenMatmulSplit) {
  std::mt19937 rng(41);
  const int64_t k = 4096, n0 = 1024, n1 = 512, n = n0 + n1, max_rows = 96;
  // x with a wide range of row scales, so that the norm's scale matters.
  std::vector<float> xv = random_reals(rng, static_cast<size_t>(max_rows * k), -3.0f, 3.0f);
  for (int64_t r = 0; r < max_rows; ++r)
    for (int64_t i = 0; i < k; ++i) xv[static_cast<size_t>(r * k + i)] *= std::ldexp(1.0f, static_cast<int>(r % 7) - 3);
  const Tensor x = upload(xv, DType::F32, {max_rows, k});
  const Tensor norm_w = upload(random_reals(rng, static_cast<size_t>(k), 0.5f, 1.5f), DType::BF16, {k});
  const Tensor w = upload(random_reals(rng, static_cast<size_t>(n * k), -0.05f, 0.05f), DType::BF16, {n, k});
  const Tensor bias = upload(random_reals(rng, static_cast<size_t>(n)), DType::BF16, {n});
  for (bool zero_centred : {false, true})
    for (int64_t rows : {1, 2, 3, 8, 13, 64, 65, 96}) {
      const Tensor xr = x.first_rows(rows);
      const Tensor xn = zeros({rows, k}), a0 = zeros({rows, n0}), a1 = zeros({rows, n1});
      const Tensor b0 = zeros({rows, n0}), b1 = zeros({rows, n1});
      backend_->rms_norm(xr, norm_w, 1e-6f, zero_centred, xn);
      const Tensor unfused[] = {a0, a1};
      backend_->matmul_split(xn, w, bias, unfused);
      const Tensor fused[] = {b0, b1};
      const Tensor scratch = zeros({rows, k});
      backend_->rms_norm_matmul_split(xr, norm_w, 1e-6f, zero_centred, scratch, w, bias, fused);
      EXPECT_EQ(first_difference(download(a0), download(b0)), -1) << rows << " rows, zero_centred " << zero_centred;
      EXPECT_EQ(first_difference(download(a1), download(b1)), -1) << rows << " rows, zero_centred " << zero_centred;
    }
}

TEST_F(CudaFusedTest, FusedDecodeRowsAreBatchInvariant) {
  std::mt19937 rng(43);
  const int64_t k = 2048, n = 768, max_rows = 64;
  const Tensor x = upload(random_reals(rng, static_cast<size_t>(max_rows * k), -2.0f, 2.0f), DType::F32, {max_rows, k});
  const Tensor norm_w = upload(random_reals(rng, static_cast<size_t>(k), 0.5f, 1.5f), DType::BF16, {k});
  const Tensor w = upload(random_reals(rng, static_cast<size_t>(n * k), -0.05f, 0.05f), DType::BF16, {n, k});
  const Tensor all = zeros({max_rows, n}), scratch = zeros({max_rows, k});
  const Tensor outs[] = {all};
  backend_->rms_norm_matmul_split(x, norm_w, 1e-5f, false, scratch, w, Tensor(), outs);
  const std::vector<uint8_t> together = download(all);
  for (int64_t r : {0, 1, 7, 31, 63}) {
    const Tensor one = zeros({1, n});
    const Tensor one_out[] = {one};
    backend_->rms_norm_matmul_split(x.rows_from(r).first_rows(1), norm_w, 1e-5f, false, scratch.first_rows(1), w, Tensor(),
                                    one_out);
    const std::vector<uint8_t> alone = download(one);
    EXPECT_EQ(std::memcmp(alone.data(), together.data() + r * n * 4, static_cast<size_t>(n) * 4), 0) << "row " << r;
  }
}

TEST_F(CudaFusedTest, SwigluMatmulAddIsSwigluThenMatmulAdd) {
  std::mt19937 rng(42);
  const int64_t k = 3072, n = 1024, max_rows = 96;
  const std::vector<float> gate_v = random_reals(rng, static_cast<size_t>(max_rows * k), -6.0f, 6.0f);
  const Tensor up = upload(random_reals(rng, static_cast<size_t>(max_rows * k), -2.0f, 2.0f), DType::F32, {max_rows, k});
  const Tensor w = upload(random_reals(rng, static_cast<size_t>(n * k), -0.05f, 0.05f), DType::BF16, {n, k});
  const std::vector<float> residual = random_reals(rng, static_cast<size_t>(max_rows * n), -4.0f, 4.0f);
  for (int64_t rows : {1, 4, 9, 64, 65, 96}) {
    const Tensor gate_a = upload(gate_v, DType::F32, {max_rows, k}).first_rows(rows);
    const Tensor gate_b = upload(gate_v, DType::F32, {max_rows, k}).first_rows(rows);
    const Tensor ya = upload(residual, DType::F32, {max_rows, n}).first_rows(rows);
    const Tensor yb = upload(residual, DType::F32, {max_rows, n}).first_rows(rows);
    const Tensor scratch = zeros({rows, n});
    backend_->swiglu(gate_a, up.first_rows(rows), gate_a);
    backend_->matmul_add(gate_a, w, Tensor(), scratch, ya);
    backend_->swiglu_matmul_add(gate_b, up.first_rows(rows), w, Tensor(), scratch, yb);
    EXPECT_EQ(first_difference(download(ya), download(yb)), -1) << rows << " rows";
  }
}

// The MLP with the activation stored by the gate/up matmul (decode rows) or the two fused ops (prefill rows)
// against the unfused sequence, biases included (the pairs' up half takes the second half of the bias).
TEST_F(CudaFusedTest, SwigluMlpAddIsTheSequence) {
  std::mt19937 rng(44);
  const int64_t hidden = 1024, inter = 1000, max_rows = 96;
  const Tensor norm_w = upload(random_reals(rng, static_cast<size_t>(hidden), 0.5f, 1.5f), DType::BF16, {hidden});
  const Tensor w_gate_up =
      upload(random_reals(rng, static_cast<size_t>(2 * inter * hidden), -0.08f, 0.08f), DType::BF16, {2 * inter, hidden});
  const Tensor gate_up_bias = upload(random_reals(rng, static_cast<size_t>(2 * inter)), DType::BF16, {2 * inter});
  const Tensor w_down =
      upload(random_reals(rng, static_cast<size_t>(hidden * inter), -0.05f, 0.05f), DType::BF16, {hidden, inter});
  const Tensor down_bias = upload(random_reals(rng, static_cast<size_t>(hidden)), DType::BF16, {hidden});
  const std::vector<float> residual = random_reals(rng, static_cast<size_t>(max_rows * hidden), -3.0f, 3.0f);
  for (bool with_bias : {false, true})
    for (int64_t rows : {1, 3, 8, 13, 64, 65, 96}) {
      const Tensor gub = with_bias ? gate_up_bias : Tensor(), db = with_bias ? down_bias : Tensor();
      const Tensor xa = upload(residual, DType::F32, {max_rows, hidden}).first_rows(rows);
      const Tensor xb = upload(residual, DType::F32, {max_rows, hidden}).first_rows(rows);
      const Tensor xn = zeros({rows, hidden}), gate = zeros({rows, inter}), up = zeros({rows, inter});
      backend_->rms_norm(xa, norm_w, 1e-6f, false, xn);
      const Tensor gate_up[] = {gate, up};
      backend_->matmul_split(xn, w_gate_up, gub, gate_up);
      backend_->swiglu(gate, up, gate);
      backend_->matmul_add(gate, w_down, db, xn, xa);
      const Tensor xn_b = zeros({rows, hidden}), gate_b = zeros({rows, inter}), up_b = zeros({rows, inter});
      backend_->swiglu_mlp_add(xb, norm_w, 1e-6f, false, xn_b, w_gate_up, gub, gate_b, up_b, w_down, db);
      EXPECT_EQ(first_difference(download(xa), download(xb)), -1) << rows << " rows, bias " << with_bias;
    }
}

// A norm handoff (Backend::prepare_norm; cuda::NormHandoff): o_proj's residual add writes the split of x · w'
// for the MLP's norm, down's the one for the next layer's q/k/v norm, and the consumers apply the row scale
// at their stores. Against the unhinted sequence: the residual after o_proj bitwise, the rest within the
// split's precision; and a row's results bitwise the same alone or among 63 others.
TEST_F(CudaFusedTest, NormHandoffMatchesTheSequenceAndIsBatchInvariant) {
  std::mt19937 rng(45);
  const int64_t hidden = 2048, attn_dim = 2048, inter = 1536, qkv = 768, max_rows = 64;
  const Tensor w_o = upload(random_reals(rng, static_cast<size_t>(hidden * attn_dim), -0.05f, 0.05f), DType::BF16,
                            {hidden, attn_dim});
  const Tensor post_norm = upload(random_reals(rng, static_cast<size_t>(hidden), 0.5f, 1.5f), DType::BF16, {hidden});
  const Tensor next_norm = upload(random_reals(rng, static_cast<size_t>(hidden), 0.5f, 1.5f), DType::BF16, {hidden});
  const Tensor w_gate_up = upload(random_reals(rng, static_cast<size_t>(2 * inter * hidden), -0.06f, 0.06f), DType::BF16,
                                  {2 * inter, hidden});
  const Tensor w_down =
      upload(random_reals(rng, static_cast<size_t>(hidden * inter), -0.05f, 0.05f), DType::BF16, {hidden, inter});
  const Tensor w_qkv = upload(random_reals(rng, static_cast<size_t>(qkv * hidden), -0.05f, 0.05f), DType::BF16, {qkv, hidden});
  const Tensor qkv_bias = upload(random_reals(rng, static_cast<size_t>(qkv)), DType::BF16, {qkv});
  const std::vector<float> attn_v = random_reals(rng, static_cast<size_t>(max_rows * attn_dim), -2.0f, 2.0f);
  std::vector<float> residual = random_reals(rng, static_cast<size_t>(max_rows * hidden), -3.0f, 3.0f);
  for (int64_t r = 0; r < max_rows; ++r)  // rows of different scales, so that each row's norm matters
    for (int64_t i = 0; i < hidden; ++i) residual[static_cast<size_t>(r * hidden + i)] *= std::ldexp(1.0f, static_cast<int>(r % 5) - 2);

  // One layer's tail and the next layer's q/k/v for rows [first, first + rows); returns (x after o_proj,
  // x after the MLP, q/k/v).
  auto run = [&](int64_t first, int64_t rows, bool hinted) {
    const Tensor attn = upload(attn_v, DType::F32, {max_rows, attn_dim}).rows_from(first).first_rows(rows);
    const Tensor x = upload(residual, DType::F32, {max_rows, hidden}).rows_from(first).first_rows(rows);
    const Tensor xn = zeros({rows, hidden}), gate = zeros({rows, inter}), up = zeros({rows, inter});
    const Tensor out = zeros({rows, qkv});
    if (hinted) backend_->prepare_norm(x, post_norm, false);
    backend_->matmul_add(attn, w_o, Tensor(), xn, x);
    std::vector<std::vector<uint8_t>> result{download(x)};
    if (hinted) backend_->prepare_norm(x, next_norm, false);
    backend_->swiglu_mlp_add(x, post_norm, 1e-6f, false, xn, w_gate_up, Tensor(), gate, up, w_down, Tensor());
    result.push_back(download(x));
    const Tensor outs[] = {out};
    backend_->rms_norm_matmul_split(x, next_norm, 1e-6f, false, xn, w_qkv, qkv_bias, outs);
    result.push_back(download(out));
    return result;
  };
  auto floats = [](const std::vector<uint8_t>& b) {
    std::vector<float> f(b.size() / 4);
    std::memcpy(f.data(), b.data(), b.size());
    return f;
  };
  // Normwise and elementwise closeness at the split's precision (2^-16 per element of x, both paths).
  auto expect_close = [&](const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, const std::string& what) {
    const std::vector<float> fa = floats(a), fb = floats(b);
    double diff = 0, norm = 0, worst = 0, largest = 0;
    for (size_t i = 0; i < fa.size(); ++i) {
      const double d = std::fabs(static_cast<double>(fa[i]) - fb[i]);
      diff += d * d;
      norm += static_cast<double>(fa[i]) * fa[i];
      worst = std::max(worst, std::isnan(d) ? INFINITY : d);
      largest = std::max(largest, std::fabs(static_cast<double>(fa[i])));
    }
    EXPECT_LE(std::sqrt(diff), 1e-4 * std::sqrt(norm)) << what;
    EXPECT_LE(worst, 1e-3 * largest) << what;
  };
  for (int64_t rows : {1, 7, 64}) {
    const auto plain = run(0, rows, false), handed = run(0, rows, true);
    EXPECT_EQ(first_difference(plain[0], handed[0]), -1) << rows << " rows: x after o_proj";
    expect_close(plain[1], handed[1], std::to_string(rows) + " rows: x after the MLP");
    expect_close(plain[2], handed[2], std::to_string(rows) + " rows: q/k/v");
  }
  const auto together = run(0, max_rows, true);
  for (int64_t r : {0, 5, 63}) {
    const auto alone = run(r, 1, true);
    for (size_t part = 0; part < alone.size(); ++part) {
      const size_t width = alone[part].size();
      EXPECT_EQ(std::memcmp(alone[part].data(), together[part].data() + r * width, width), 0) << "row " << r << ", part " << part;
    }
  }
}

// The layer stream (cuda_ops.cuh, Context::stream_queue): two layers' one-row matmuls between attentions —
// o_proj (x split in the kernel, from a q/k/v output of the same launch the second time), gate/up (a norm
// handoff's consumer, storing the activation and its split), down (reading that split, writing the next
// handoff), the next q/k/v (three outputs and a bias), and an lm_head — queued and launched as one
// persistent kernel of eight phases, are bitwise the kernel-per-op launches (HELIUM_CUDA_STREAM=off), eagerly
// and replayed from a captured graph (twice: the kernel's counters reset between launches), and a row alone
// is bitwise that row of a 3-row batch (which takes the kernel-per-op path). Qwen3-8B's widths.
TEST(CudaLayerStreamTest, LayerStreamIsTheKernelPerOpSequence) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t hidden = 4096, q_dim = 4096, kv_dim = 1024, inter = 12288, vocab = 8192, rows_max = 3;
  std::mt19937 rng(47);
  const std::vector<float> w_o_v = random_reals(rng, static_cast<size_t>(hidden * q_dim), -0.03f, 0.03f);
  const std::vector<float> w_gu_v = random_reals(rng, static_cast<size_t>(2 * inter * hidden), -0.03f, 0.03f);
  const std::vector<float> w_down_v = random_reals(rng, static_cast<size_t>(hidden * inter), -0.02f, 0.02f);
  const std::vector<float> w_qkv_v = random_reals(rng, static_cast<size_t>((q_dim + 2 * kv_dim) * hidden), -0.03f, 0.03f);
  const std::vector<float> w_head_v = random_reals(rng, static_cast<size_t>(vocab * hidden), -0.03f, 0.03f);
  const std::vector<float> qkv_bias_v = random_reals(rng, static_cast<size_t>(q_dim + 2 * kv_dim));
  const std::vector<float> post_v = random_reals(rng, static_cast<size_t>(hidden), 0.5f, 1.5f);
  const std::vector<float> next_v = random_reals(rng, static_cast<size_t>(hidden), 0.5f, 1.5f);
  const std::vector<float> final_v = random_reals(rng, static_cast<size_t>(hidden), 0.5f, 1.5f);
  const std::vector<float> attn_v = random_reals(rng, static_cast<size_t>(rows_max * q_dim), -2.0f, 2.0f);
  const std::vector<float> x_v = random_reals(rng, static_cast<size_t>(rows_max * hidden), -3.0f, 3.0f);

  struct Layer {
    std::unique_ptr<CudaBackend> b;
    std::vector<std::shared_ptr<DeviceBuffer>> keep;
    Tensor w_o, w_gu, w_down, w_qkv, w_head, qkv_bias, post, next, final_norm;
    Tensor attn, x, xn, gate, up, q, k, v, logits;
    Tensor put(const std::vector<float>& values, DType dtype, std::initializer_list<int64_t> shape) {
      return upload_to(*b, keep, values, dtype, shape);
    }
  };
  auto make = [&](bool stream) {
    setenv("HELIUM_CUDA_STREAM", stream ? "on" : "off", 1);
    CudaBackendOptions options;
    options.max_rows = 8;
    options.max_context = 1024;
    options.max_k = inter;
    auto created = CudaBackend::create(options);
    unsetenv("HELIUM_CUDA_STREAM");
    EXPECT_TRUE(created.is_ok()) << created.status().message();
    auto l = std::make_unique<Layer>();
    l->b = std::move(created).value();
    l->w_o = l->put(w_o_v, DType::BF16, {hidden, q_dim});
    l->w_gu = l->put(w_gu_v, DType::BF16, {2 * inter, hidden});
    l->w_down = l->put(w_down_v, DType::BF16, {hidden, inter});
    l->w_qkv = l->put(w_qkv_v, DType::BF16, {q_dim + 2 * kv_dim, hidden});
    l->w_head = l->put(w_head_v, DType::BF16, {vocab, hidden});
    l->qkv_bias = l->put(qkv_bias_v, DType::BF16, {q_dim + 2 * kv_dim});
    l->post = l->put(post_v, DType::BF16, {hidden});
    l->next = l->put(next_v, DType::BF16, {hidden});
    l->final_norm = l->put(final_v, DType::BF16, {hidden});
    l->attn = l->put(attn_v, DType::F32, {rows_max, q_dim});
    l->x = l->put(x_v, DType::F32, {rows_max, hidden});
    const std::vector<float> none;
    l->xn = l->put(none, DType::F32, {rows_max, inter});
    l->gate = l->put(none, DType::F32, {rows_max, inter});
    l->up = l->put(none, DType::F32, {rows_max, inter});
    l->q = l->put(none, DType::F32, {rows_max, q_dim});
    l->k = l->put(none, DType::F32, {rows_max, kv_dim});
    l->v = l->put(none, DType::F32, {rows_max, kv_dim});
    l->logits = l->put(none, DType::F32, {rows_max, vocab});
    return l;
  };
  // The two layers' ops on rows [0, rows), nothing read back in between.
  auto ops = [&](Layer& l, int64_t rows) {
    Backend& b = *l.b;
    const Tensor attn = l.attn.first_rows(rows), x = l.x.first_rows(rows), xn = l.xn.first_rows(rows);
    const Tensor gate = l.gate.first_rows(rows), up = l.up.first_rows(rows), q = l.q.first_rows(rows);
    const Tensor qkv[] = {q, l.k.first_rows(rows), l.v.first_rows(rows)};
    const Tensor head[] = {l.logits.first_rows(rows)};
    const Tensor xn_h = Tensor(xn.data, DType::F32, {rows, hidden});
    b.prepare_norm(x, l.post, false);
    b.matmul_add(attn, l.w_o, Tensor(), xn_h, x);
    b.prepare_norm(x, l.next, false);
    b.swiglu_mlp_add(x, l.post, 1e-6f, false, xn_h, l.w_gu, Tensor(), gate, up, l.w_down, Tensor());
    b.rms_norm_matmul_split(x, l.next, 1e-6f, false, xn_h, l.w_qkv, l.qkv_bias, qkv);
    b.prepare_norm(x, l.post, false);
    b.matmul_add(q, l.w_o, Tensor(), xn_h, x);  // the second layer's o_proj, from this launch's q
    b.prepare_norm(x, l.final_norm, false);
    b.swiglu_mlp_add(x, l.post, 1e-6f, false, xn_h, l.w_gu, Tensor(), gate, up, l.w_down, Tensor());
    b.rms_norm_matmul_split(x, l.final_norm, 1e-6f, false, xn_h, l.w_head, Tensor(), head);
  };
  auto results = [&](Layer& l, int64_t rows) {
    std::vector<std::vector<uint8_t>> out;
    for (const Tensor& t : {l.x, l.q, l.k, l.v, l.logits}) {
      const Tensor part = t.first_rows(rows);
      std::vector<uint8_t> bytes(part.bytes());
      l.b->copy_to_host(bytes.data(), part);
      out.push_back(std::move(bytes));
    }
    l.b->synchronize();
    return out;
  };
  auto reset_x = [&](Layer& l) {
    const std::vector<uint8_t> bytes = encode(x_v, DType::F32);
    l.b->copy_to_device(l.x, bytes.data());
  };
  const char* names[] = {"x", "q", "k", "v", "logits"};

  auto on = make(true), off = make(false);
  ops(*off, 1);
  const auto expected = results(*off, 1);
  EXPECT_EQ(off->b->layer_stream_counts().phases, 0);
  ops(*on, 1);
  const auto eager = results(*on, 1);
  const CudaBackend::StreamCounts after_eager = on->b->layer_stream_counts();
  if (on->b->device_info().compute_capability < 90) GTEST_SKIP() << "the layer stream needs sm_90";
  EXPECT_EQ(after_eager.phases, 8);
  EXPECT_EQ(after_eager.launches, 1);
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(first_difference(eager[i], expected[i]), -1) << names[i] << ": stream against kernel per op";

  reset_x(*on);
  on->b->begin_capture();
  ops(*on, 1);
  auto graph = on->b->end_capture();
  ASSERT_TRUE(graph.is_ok()) << graph.status().message();
  for (int replay = 0; replay < 2; ++replay) {
    reset_x(*on);
    (*graph)->replay();
    const auto replayed = results(*on, 1);
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_EQ(first_difference(replayed[i], expected[i]), -1) << names[i] << ": graph replay " << replay;
  }

  reset_x(*on);
  ops(*on, rows_max);
  const auto batch = results(*on, rows_max);
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(std::memcmp(batch[i].data(), expected[i].data(), expected[i].size()), 0)
        << names[i] << ": row 0 of 3 rows against the row alone";
}

TEST_F(CudaFusedTest, QkNormRopeKvWriteIsTheSequence) {
  std::mt19937 rng(44);
  // 64-256: the kernel's head in registers (up to 256 elements); 80: a head the lanes do not divide; 320: a
  // longer head, through prologue_qk_head and prologue_v_head.
  for (const int head_dim : {128, 64, 80, 256, 320}) {
    const int n_heads = 8, n_kv = 2, max_rows = 70;
    const int64_t q_dim = n_heads * head_dim, kv_dim = n_kv * head_dim, slots_total = 256;
    std::vector<float> inv_freq(head_dim / 4);  // rot_dim = head_dim / 2: the last half of each head passes
    for (size_t i = 0; i < inv_freq.size(); ++i)
      inv_freq[i] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(head_dim / 2));
    const Tensor inv = upload(inv_freq, DType::F32, {static_cast<int64_t>(inv_freq.size())});
    const RopeParams rope{head_dim, head_dim / 2, 1.25f};
    const std::vector<float> qv = random_reals(rng, static_cast<size_t>(max_rows * q_dim), -3.0f, 3.0f);
    const std::vector<float> kv = random_reals(rng, static_cast<size_t>(max_rows * kv_dim), -3.0f, 3.0f);
    const Tensor v =
        upload(random_reals(rng, static_cast<size_t>(max_rows * kv_dim)), DType::F32, {max_rows, kv_dim});
    const Tensor q_norm = upload(random_reals(rng, head_dim, 0.5f, 1.5f), DType::BF16, {head_dim});
    const Tensor k_norm = upload(random_reals(rng, head_dim, 0.5f, 1.5f), DType::BF16, {head_dim});
    for (bool with_norm : {true, false})
      for (DType cache_dtype : {DType::BF16, DType::F32})
        for (int rows : {1, 5, 70}) {
          std::vector<int32_t> posi(static_cast<size_t>(rows)), sloti(static_cast<size_t>(rows));
          for (int r = 0; r < rows; ++r) {
            posi[static_cast<size_t>(r)] = 1000 + 37 * r;
            sloti[static_cast<size_t>(r)] = (r * 53 + 11) % static_cast<int>(slots_total);
          }
          const Tensor positions = zeros({rows}, DType::I32), slots = zeros({rows}, DType::I32);
          backend_->copy_to_device(positions, posi.data());
          backend_->copy_to_device(slots, sloti.data());
          Tensor results[2][4];  // [unfused, fused][q, k, k_cache, v_cache]
          for (int fused = 0; fused < 2; ++fused) {
            Tensor q = upload(qv, DType::F32, {max_rows, q_dim}).first_rows(rows);
            Tensor k = upload(kv, DType::F32, {max_rows, kv_dim}).first_rows(rows);
            Tensor kc = zeros({slots_total, kv_dim}, cache_dtype),
                   vc = zeros({slots_total, kv_dim}, cache_dtype);
            const Tensor qn = with_norm ? q_norm : Tensor(), kn = with_norm ? k_norm : Tensor();
            if (fused) {
              backend_->qk_norm_rope_kv_write(q, k, v.first_rows(rows), qn, kn, 1e-6f, n_heads, n_kv,
                                              positions, inv, rope, slots, kc, vc);
            } else {  // the base class's sequence of unfused ops on the same backend
              backend_->Backend::qk_norm_rope_kv_write(q, k, v.first_rows(rows), qn, kn, 1e-6f, n_heads, n_kv,
                                                       positions, inv, rope, slots, kc, vc);
            }
            results[fused][0] = q;
            results[fused][1] = k;
            results[fused][2] = kc;
            results[fused][3] = vc;
          }
          const char* names[] = {"q", "k", "k_cache", "v_cache"};
          for (int t = 0; t < 4; ++t)
            EXPECT_EQ(first_difference(download(results[0][t]), download(results[1][t])), -1)
                << names[t] << ", head_dim " << head_dim << ", " << rows << " rows, norm " << with_norm
                << ", cache " << dtype_name(cache_dtype);
        }
  }
}

// rms_norm_qkv_attention on decode rows (1-4, HELIUM_CUDA_QKV_PROLOGUE=on: the q/k/v projection does the
// attention prologue in its stores, the last item stored of each head normalising, rotating and caching it)
// against the base class's sequence rms_norm_matmul_split then qk_norm_rope_attention on the same backend:
// the attention output, q and k as left, and both caches bitwise; with and without q/k norms and the
// projection's bias, partial rotary, BF16 and F32 caches, head dims 64 / 128 / 256; the per-head counters
// reset themselves (each case runs the fused op twice); 5 rows take the two ops (the count of fused
// projections says which path ran).
TEST_F(CudaFusedTest, RmsNormQkvAttentionIsTheSequence) {
  create_backend("HELIUM_CUDA_QKV_PROLOGUE", "on");
  std::mt19937 rng(47);
  struct Shape {
    int n_heads, n_kv, head_dim, rot_dim;
  };
  const int64_t hidden = 1024, page = 16;
  for (const Shape& sh : {Shape{8, 2, 128, 128}, Shape{16, 4, 64, 32}, Shape{4, 4, 256, 256}})
    for (bool with_norm : {true, false})
      for (bool with_bias : {false, true})
        for (DType cache_dtype : {DType::BF16, DType::F32})
          for (int rows : {1, 2, 4, 5}) {
            const int hd = sh.head_dim;
            const int64_t q_dim = int64_t{sh.n_heads} * hd, kv_dim = int64_t{sh.n_kv} * hd, n = q_dim + 2 * kv_dim;
            const std::string what = "heads " + std::to_string(sh.n_heads) + "/" + std::to_string(sh.n_kv) +
                                     " head_dim " + std::to_string(hd) + (with_norm ? " normed" : "") +
                                     (with_bias ? " bias " : " ") + std::string(dtype_name(cache_dtype)) + ", " +
                                     std::to_string(rows) + " rows";
            // Row r: its own sequence of pages 4r .. 4r + 3, prefix 20 + 9r keys (its own the last).
            const int max_pages = 4;
            std::vector<int32_t> tables(static_cast<size_t>(rows * max_pages)), row_table(static_cast<size_t>(rows));
            std::vector<int32_t> prefix(static_cast<size_t>(rows)), positions(static_cast<size_t>(rows)),
                write_slots(static_cast<size_t>(rows));
            for (int r = 0; r < rows; ++r) {
              for (int p = 0; p < max_pages; ++p) tables[static_cast<size_t>(r * max_pages + p)] = (r * max_pages + p + 3) % (rows * max_pages);
              row_table[static_cast<size_t>(r)] = r;
              prefix[static_cast<size_t>(r)] = 20 + 9 * r;
              positions[static_cast<size_t>(r)] = prefix[static_cast<size_t>(r)] - 1;
              const int pos = positions[static_cast<size_t>(r)];
              write_slots[static_cast<size_t>(r)] = tables[static_cast<size_t>(r * max_pages + pos / page)] * page + pos % page;
            }
            const int64_t slots_total = int64_t{rows} * max_pages * page;
            const AttentionLayout layout =
                decode_layout(static_cast<int>(page), rows, max_pages, tables, row_table, prefix, write_slots);
            const Tensor pos = ints(positions, {rows});
            std::vector<float> inv_freq(static_cast<size_t>(sh.rot_dim / 2));
            for (size_t i = 0; i < inv_freq.size(); ++i)
              inv_freq[i] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(sh.rot_dim));
            const Tensor inv = upload(inv_freq, DType::F32, {static_cast<int64_t>(inv_freq.size())});
            const RopeParams rope{hd, sh.rot_dim, 1.0f};
            const AttentionShape shape{sh.n_heads, sh.n_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
            const std::vector<float> xv = random_reals(rng, static_cast<size_t>(rows * hidden), -2.0f, 2.0f);
            const Tensor norm_w = upload(random_reals(rng, static_cast<size_t>(hidden), 0.5f, 1.5f), DType::BF16, {hidden});
            const Tensor w = upload(random_reals(rng, static_cast<size_t>(n * hidden), -0.06f, 0.06f), DType::BF16, {n, hidden});
            const Tensor bias = with_bias ? upload(random_reals(rng, static_cast<size_t>(n)), DType::F32, {n}) : Tensor();
            const Tensor q_norm = with_norm ? upload(random_reals(rng, static_cast<size_t>(hd), 0.5f, 1.5f), DType::BF16, {hd}) : Tensor();
            const Tensor k_norm = with_norm ? upload(random_reals(rng, static_cast<size_t>(hd), 0.5f, 1.5f), DType::BF16, {hd}) : Tensor();
            const std::vector<float> cache_values = random_reals(rng, static_cast<size_t>(slots_total * kv_dim));
            // One call; returns (out, q, k, k cache, v cache).
            auto run = [&](bool fused) {
              const Tensor x = upload(xv, DType::F32, {rows, hidden}), xn = zeros({rows, hidden});
              const Tensor q = zeros({rows, q_dim}), k = zeros({rows, kv_dim}), v = zeros({rows, kv_dim});
              const Tensor kc = upload(cache_values, cache_dtype, {slots_total, kv_dim});
              const Tensor vc = upload(cache_values, cache_dtype, {slots_total, kv_dim});
              const Tensor out = upload(std::vector<float>(static_cast<size_t>(rows * q_dim), std::nanf("")), DType::F32,
                                        {rows, q_dim});
              if (fused)
                backend_->rms_norm_qkv_attention(x, norm_w, 1e-6f, xn, w, bias, q, k, v, q_norm, k_norm, pos, inv, rope, kc,
                                                 vc, shape, layout, out);
              else
                backend_->Backend::rms_norm_qkv_attention(x, norm_w, 1e-6f, xn, w, bias, q, k, v, q_norm, k_norm, pos, inv,
                                                          rope, kc, vc, shape, layout, out);
              return std::vector<std::vector<uint8_t>>{download(out), download(q), download(k), download(kc), download(vc)};
            };
            const auto sequence = run(false);
            const int64_t before = backend_->qkv_prologue_count();
            const auto fused = run(true), again = run(true);
            EXPECT_EQ(backend_->qkv_prologue_count() - before, rows <= 4 ? 2 : 0) << what;
            const char* names[] = {"out", "q", "k", "k_cache", "v_cache"};
            for (int t = 0; t < 5; ++t) {
              EXPECT_EQ(first_difference(sequence[t], fused[t]), -1) << what << ": " << names[t];
              EXPECT_EQ(first_difference(sequence[t], again[t]), -1) << what << ": " << names[t] << ", second call";
            }
          }
}

// The attention ops followed by o_proj's matmul_add on their output (the dense model's order): on decode rows
// the merge writes the output's split and o_proj reads it with no split kernel (attention_split_count). The
// output and the residual after o_proj are bitwise those of the same ops with another op between them
// (which makes o_proj split its x itself), for each attention op, rows 1-64 of sequences at contexts across
// the partition tiers (64 and 128 keys) and 65 rows (past the decode rows: no split); and a row alone is
// bitwise that row of a 64-row batch.
TEST_F(CudaFusedTest, AttentionSplitForOProjIsTheSequence) {
  std::mt19937 rng(53);
  // Sequence s's pages: its last (where its own key goes) page kShared + s, the others drawn from kShared
  // pages that every sequence reads and none writes.
  constexpr int n_heads = 8, n_kv = 2, hd = 128, page = 16, max_pages = 192, kShared = 256, max_rows = 65;
  const int64_t hidden = 1024, q_dim = int64_t{n_heads} * hd, kv_dim = int64_t{n_kv} * hd, n_qkv = q_dim + 2 * kv_dim;
  const int64_t slots_total = int64_t{kShared + max_rows} * page;
  const Tensor w_qkv = upload(random_reals(rng, static_cast<size_t>(n_qkv * hidden), -0.06f, 0.06f), DType::BF16,
                              {n_qkv, hidden});
  const Tensor norm_w = upload(random_reals(rng, static_cast<size_t>(hidden), 0.5f, 1.5f), DType::BF16, {hidden});
  const Tensor q_norm = upload(random_reals(rng, static_cast<size_t>(hd), 0.5f, 1.5f), DType::BF16, {hd});
  const Tensor k_norm = upload(random_reals(rng, static_cast<size_t>(hd), 0.5f, 1.5f), DType::BF16, {hd});
  const Tensor w_o = upload(random_reals(rng, static_cast<size_t>(hidden * q_dim), -0.05f, 0.05f), DType::BF16,
                            {hidden, q_dim});
  const std::vector<float> xv = random_reals(rng, static_cast<size_t>(max_rows * hidden), -2.0f, 2.0f);
  const std::vector<float> cache_values = random_reals(rng, static_cast<size_t>(slots_total * kv_dim));
  std::vector<float> inv_freq(static_cast<size_t>(hd / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(hd));
  const Tensor inv = upload(inv_freq, DType::F32, {static_cast<int64_t>(inv_freq.size())});
  const RopeParams rope{hd, hd, 1.0f};
  const AttentionShape shape{n_heads, n_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
  const Tensor scratch = zeros({max_rows, hidden}), spare = zeros({1, 8}), spare_out = zeros({1, 8});
  enum Op { kQkvAttention, kQkNormRopeAttention, kAttention };

  // Rows [first, first + rows) of the 65 sequences (sequence s: 37 + 45 s keys, its own the last); returns
  // (attention output, x after o_proj).
  auto run = [&](Op op, int first, int rows, bool between) {
    std::vector<int32_t> tables, row_table, prefix, positions, write_slots;
    for (int r = 0; r < rows; ++r) {
      const int s = first + r;
      prefix.push_back(37 + 45 * s);
      positions.push_back(prefix.back() - 1);
      const int last_page = positions.back() / page;
      for (int p = 0; p < max_pages; ++p) tables.push_back(p == last_page ? kShared + s : (p * 7 + s * 13) % kShared);
      row_table.push_back(r);
      write_slots.push_back(tables[static_cast<size_t>(r * max_pages + positions.back() / page)] * page + positions.back() % page);
    }
    const AttentionLayout layout = decode_layout(page, rows, max_pages, tables, row_table, prefix, write_slots);
    const Tensor pos = ints(positions, {rows});
    const std::vector<float> x_rows(xv.begin() + int64_t{first} * hidden, xv.begin() + int64_t{first + rows} * hidden);
    const Tensor x = upload(x_rows, DType::F32, {rows, hidden}), xn = zeros({rows, hidden});
    const Tensor q = zeros({rows, q_dim}), k = zeros({rows, kv_dim}), v = zeros({rows, kv_dim});
    const Tensor kc = upload(cache_values, DType::BF16, {slots_total, kv_dim});
    const Tensor vc = upload(cache_values, DType::BF16, {slots_total, kv_dim});
    const Tensor out = zeros({rows, q_dim});
    const Tensor qkv[] = {q, k, v};
    if (op != kQkvAttention) backend_->rms_norm_matmul_split(x, norm_w, 1e-6f, false, xn, w_qkv, Tensor(), qkv);
    if (op == kAttention) backend_->qk_norm_rope_kv_write(q, k, v, q_norm, k_norm, 1e-6f, n_heads, n_kv, pos, inv, rope,
                                                          layout.write_slots, kc, vc);
    if (op == kQkvAttention)
      backend_->rms_norm_qkv_attention(x, norm_w, 1e-6f, xn, w_qkv, Tensor(), q, k, v, q_norm, k_norm, pos, inv, rope, kc,
                                       vc, shape, layout, out);
    else if (op == kQkNormRopeAttention)
      backend_->qk_norm_rope_attention(q, k, v, q_norm, k_norm, 1e-6f, pos, inv, rope, kc, vc, shape, layout, out);
    else
      backend_->attention(q, kc, vc, shape, layout, out);
    if (between) backend_->add(spare, spare, spare_out);  // any op: o_proj then splits its x itself
    backend_->matmul_add(out, w_o, Tensor(), scratch.first_rows(rows), x);
    return std::vector<std::vector<uint8_t>>{download(out), download(x)};
  };
  for (Op op : {kQkvAttention, kQkNormRopeAttention, kAttention})
    for (int rows : {1, 2, 4, 5, 64, 65}) {
      const std::string what = "op " + std::to_string(op) + ", " + std::to_string(rows) + " rows";
      const auto sequence = run(op, 0, rows, true);
      const int64_t before = backend_->attention_split_count();
      const auto handed = run(op, 0, rows, false);
      EXPECT_EQ(backend_->attention_split_count() - before, rows <= kMaxDecodeRows ? 1 : 0) << what;
      EXPECT_EQ(first_difference(sequence[0], handed[0]), -1) << what << ": attention output";
      EXPECT_EQ(first_difference(sequence[1], handed[1]), -1) << what << ": x after o_proj";
    }
  const auto together = run(kQkvAttention, 0, 64, false);
  for (int r : {0, 17, 63}) {
    const auto alone = run(kQkvAttention, r, 1, false);
    for (size_t part = 0; part < alone.size(); ++part) {
      const size_t width = alone[part].size();
      EXPECT_EQ(std::memcmp(alone[part].data(), together[part].data() + r * width, width), 0) << "row " << r << ", part " << part;
    }
  }
}

// qk_norm_rope_attention on decode rows (one kernel: the attention blocks normalise and rotate their
// queries, compute the step's own keys where they would load them, write the rows' K/V, and with few
// partitions merge in the last block) against the base class's sequence qk_norm_rope_kv_write then
// attention on the same backend: the output and both caches bitwise. Rows: decode rows of their own
// sequences at contexts across the partition tiers (64 / 128 / 256 keys; up to 32 partitions the fused
// kernel merges, past that the merge kernel does), a prompt chunk of 6 rows of one sequence (each row
// attends to the chunk's earlier rows: keys written by other rows of the step), a row without keys, and a
// speculation tree (keys at write slots through the masks); GQA groups 1 / 2 / 4 / 8 / 16 (two head passes), head dims 32..256,
// BF16 and F32 caches, with and without q/k norms, partial rotary; the fused kernel for every grid
// (HELIUM_CUDA_ATTN_FUSED=all), merging in the kernel when the grid has at most 32 partitions (this
// test's has 44: the merge kernel), at any count (HELIUM_CUDA_ATTN_FUSED_MERGE=128) or never (0), and
// with the late trigger (merging in the kernel); and a decode row alone against the same row in the batch.
TEST(CudaFusedAttentionTest, QkNormRopeAttentionIsTheSequence) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  struct Setting {
    const char* name;
    const char* merge;    // HELIUM_CUDA_ATTN_FUSED_MERGE
    const char* trigger;  // HELIUM_CUDA_ATTN_FUSED_TRIGGER
  };
  for (const Setting& setting : {Setting{"default", nullptr, nullptr}, Setting{"merge in the kernel", "128", nullptr},
                                 Setting{"merge kernel", "0", nullptr}, Setting{"late trigger", "128", "late"}}) {
    setenv("HELIUM_CUDA_ATTN_FUSED", "all", 1);  // every grid, however many waves
    if (setting.merge != nullptr) setenv("HELIUM_CUDA_ATTN_FUSED_MERGE", setting.merge, 1);
    if (setting.trigger != nullptr) setenv("HELIUM_CUDA_ATTN_FUSED_TRIGGER", setting.trigger, 1);
    CudaBackendOptions options;
    options.max_rows = 64;
    options.max_context = 12288;
    options.max_k = 1024;
    options.max_heads = 32;
    auto created = CudaBackend::create(options);
    unsetenv("HELIUM_CUDA_ATTN_FUSED");
    unsetenv("HELIUM_CUDA_ATTN_FUSED_MERGE");
    unsetenv("HELIUM_CUDA_ATTN_FUSED_TRIGGER");
    ASSERT_TRUE(created.is_ok()) << created.status().message();
    CudaBackend& b = *created.value();
    std::vector<std::shared_ptr<DeviceBuffer>> keep;
    auto device = [&](const void* host, DType dtype, std::initializer_list<int64_t> shape) {
      Tensor t(nullptr, dtype, shape);
      auto buffer = b.allocate(t.bytes());
      EXPECT_TRUE(buffer.is_ok());
      t.data = (*buffer)->data();
      keep.push_back(*buffer);
      b.copy_to_device(t, host);
      return t;
    };
    auto bytes_of = [&](const Tensor& t) {
      std::vector<uint8_t> out(t.bytes());
      b.copy_to_host(out.data(), t);
      b.synchronize();
      return out;
    };
    struct Shape {
      int n_heads, n_kv, head_dim, rot_dim;
    };
    std::mt19937 rng(61);
    int case_index = 0;
    for (const Shape& sh : {Shape{32, 8, 128, 128}, Shape{16, 2, 64, 32}, Shape{4, 4, 256, 256}, Shape{4, 2, 32, 32},
                              Shape{32, 2, 64, 64}})
      for (DType cache_dtype : {DType::BF16, DType::F32})
        for (bool with_norm : {true, false}) {
          if (setting.merge != nullptr && std::string(setting.merge) == "0" && (case_index++ % 3) != 0)
            continue;  // a sample of the cases
          const int page = 16, hd = sh.head_dim;
          const int64_t q_dim = int64_t{sh.n_heads} * hd, kv_dim = int64_t{sh.n_kv} * hd;
          const std::string what = std::string(setting.name) + ": heads " + std::to_string(sh.n_heads) + "/" +
                                   std::to_string(sh.n_kv) + " head_dim " + std::to_string(hd) + " rot " +
                                   std::to_string(sh.rot_dim) + " " + std::string(dtype_name(cache_dtype)) +
                                   (with_norm ? " normed" : "");
          // Sequences of pages from a shuffled pool; each row: (sequence, prefix length, tree mask).
          const std::vector<int> contexts = {1, 63, 64, 65, 700, 1024, 1025, 3000, 4097, 8192, 8193, 11000};
          std::vector<int> lengths = contexts;  // sequence s holds lengths[s] positions
          const int chunk_seq = static_cast<int>(lengths.size()), chunk0 = 2040, chunk_rows = 6;
          lengths.push_back(chunk0 + chunk_rows);
          const int tree_seq = static_cast<int>(lengths.size()), tree_prefix = 250;
          lengths.push_back(tree_prefix);
          const int empty_seq = static_cast<int>(lengths.size());
          lengths.push_back(1);  // a row with no keys still writes its K/V here
          const int max_pages = 12288 / page + 2;
          int64_t total_pages = 0;
          for (int len : lengths) total_pages += (len + page - 1) / page + 1;
          const std::vector<int> parents = {-1, 0, 0, 1, 2, 2, 3, 6};
          const int64_t slots_total = total_pages * page + 64;  // + free slots for the tree nodes
          std::vector<int32_t> pool(static_cast<size_t>(total_pages));
          std::iota(pool.begin(), pool.end(), 0);
          std::shuffle(pool.begin(), pool.end(), rng);
          std::vector<int32_t> tables(lengths.size() * max_pages, 0);
          size_t next_page = 0;
          for (size_t sq = 0; sq < lengths.size(); ++sq)
            for (int p = 0; p < (lengths[sq] + page - 1) / page; ++p) tables[sq * max_pages + p] = pool[next_page++];
          auto slot_of = [&](int sq, int pos) {
            return tables[static_cast<size_t>(sq) * max_pages + pos / page] * page + pos % page;
          };
          std::vector<int32_t> row_table, prefix, positions, write_slots;
          std::vector<int64_t> masks;
          for (size_t sq = 0; sq < contexts.size(); ++sq) {  // one decode row each, at its last position
            row_table.push_back(static_cast<int32_t>(sq));
            prefix.push_back(contexts[sq]);
            positions.push_back(contexts[sq] - 1);
            write_slots.push_back(slot_of(static_cast<int>(sq), contexts[sq] - 1));
            masks.push_back(0);
          }
          for (int r = 0; r < chunk_rows; ++r) {
            row_table.push_back(chunk_seq);
            prefix.push_back(chunk0 + r + 1);
            positions.push_back(chunk0 + r);
            write_slots.push_back(slot_of(chunk_seq, chunk0 + r));
            masks.push_back(0);
          }
          row_table.push_back(empty_seq);
          prefix.push_back(0);
          positions.push_back(0);
          write_slots.push_back(slot_of(empty_seq, 0));
          masks.push_back(0);
          const int first_node = static_cast<int>(row_table.size());
          for (size_t node = 0; node < parents.size(); ++node) {
            int64_t mask = int64_t{1} << (first_node + node);
            int depth = 0;
            for (int p = parents[node]; p >= 0; p = parents[p], ++depth) mask |= int64_t{1} << (first_node + p);
            row_table.push_back(tree_seq);
            prefix.push_back(tree_prefix);
            positions.push_back(tree_prefix + depth);
            write_slots.push_back(static_cast<int32_t>(total_pages * page + static_cast<int64_t>(node)));
            masks.push_back(mask);
          }
          const int rows = static_cast<int>(row_table.size());
          ASSERT_LE(rows, 64);
          int32_t max_keys = 0;
          for (int r = 0; r < rows; ++r) max_keys = std::max(max_keys, prefix[r] + std::popcount(static_cast<uint64_t>(masks[r])));

          std::vector<float> inv_freq(static_cast<size_t>(sh.rot_dim / 2));
          for (size_t i = 0; i < inv_freq.size(); ++i)
            inv_freq[i] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(sh.rot_dim));
          const RopeParams rope{hd, sh.rot_dim, 1.0f};
          const AttentionShape shape{sh.n_heads, sh.n_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
          const std::vector<float> qv = random_reals(rng, static_cast<size_t>(rows * q_dim), -2.0f, 2.0f);
          const std::vector<float> kv = random_reals(rng, static_cast<size_t>(rows * kv_dim), -2.0f, 2.0f);
          const std::vector<float> vv = random_reals(rng, static_cast<size_t>(rows * kv_dim));
          const std::vector<uint8_t> cache_bytes =
              encode(random_reals(rng, static_cast<size_t>(slots_total * kv_dim)), cache_dtype);
          std::vector<float> qn_w = random_reals(rng, static_cast<size_t>(hd), 0.5f, 1.5f);
          std::vector<uint16_t> qn_b(qn_w.size()), kn_b(qn_w.size());
          const std::vector<float> kn_w = random_reals(rng, static_cast<size_t>(hd), 0.5f, 1.5f);
          for (size_t i = 0; i < qn_w.size(); ++i) {
            qn_b[i] = f32_to_bf16(qn_w[i]);
            kn_b[i] = f32_to_bf16(kn_w[i]);
          }
          const Tensor q_norm = with_norm ? device(qn_b.data(), DType::BF16, {hd}) : Tensor();
          const Tensor k_norm = with_norm ? device(kn_b.data(), DType::BF16, {hd}) : Tensor();
          const Tensor inv = device(inv_freq.data(), DType::F32, {static_cast<int64_t>(inv_freq.size())});

          // One call over rows `pick` (indices into the rows above); returns (out, k cache, v cache).
          auto run = [&](const std::vector<int>& pick, bool fused) {
            const int n = static_cast<int>(pick.size());
            std::vector<int32_t> rt, pl, ps, ws;
            std::vector<int64_t> mk;
            std::vector<float> qs, ks, vs;
            for (int r : pick) {
              rt.push_back(row_table[r]);
              pl.push_back(prefix[r]);
              ps.push_back(positions[r]);
              ws.push_back(write_slots[r]);
              mk.push_back(masks[r]);
              qs.insert(qs.end(), qv.begin() + r * q_dim, qv.begin() + (r + 1) * q_dim);
              ks.insert(ks.end(), kv.begin() + r * kv_dim, kv.begin() + (r + 1) * kv_dim);
              vs.insert(vs.end(), vv.begin() + r * kv_dim, vv.begin() + (r + 1) * kv_dim);
            }
            const bool tree = std::any_of(mk.begin(), mk.end(), [](int64_t m) { return m != 0; });
            AttentionLayout layout;
            layout.page_size = page;
            layout.block_tables = device(tables.data(), DType::I32, {static_cast<int64_t>(lengths.size()), max_pages});
            layout.row_table = device(rt.data(), DType::I32, {n});
            layout.prefix_lens = device(pl.data(), DType::I32, {n});
            layout.write_slots = device(ws.data(), DType::I32, {n});
            if (tree) layout.tree_masks = device(mk.data(), DType::I64, {n});
            layout.max_keys = max_keys;
            Tensor q = device(qs.data(), DType::F32, {n, q_dim});
            Tensor k = device(ks.data(), DType::F32, {n, kv_dim});
            const Tensor v = device(vs.data(), DType::F32, {n, kv_dim});
            const Tensor pos = device(ps.data(), DType::I32, {n});
            Tensor kc = device(cache_bytes.data(), cache_dtype, {slots_total, kv_dim});
            Tensor vc = device(cache_bytes.data(), cache_dtype, {slots_total, kv_dim});
            std::vector<float> poison(static_cast<size_t>(n * q_dim), std::numeric_limits<float>::quiet_NaN());
            Tensor out = device(poison.data(), DType::F32, {n, q_dim});
            if (fused) b.qk_norm_rope_attention(q, k, v, q_norm, k_norm, 1e-6f, pos, inv, rope, kc, vc, shape, layout, out);
            else b.Backend::qk_norm_rope_attention(q, k, v, q_norm, k_norm, 1e-6f, pos, inv, rope, kc, vc, shape, layout, out);
            return std::vector<std::vector<uint8_t>>{bytes_of(out), bytes_of(kc), bytes_of(vc)};
          };
          std::vector<int> all(static_cast<size_t>(rows));
          std::iota(all.begin(), all.end(), 0);
          const auto sequence = run(all, false), fused = run(all, true);
          const char* names[] = {"out", "k_cache", "v_cache"};
          for (int t = 0; t < 3; ++t) {
            const int64_t at = first_difference(sequence[t], fused[t]);
            std::string where;
            if (t == 0 && at >= 0) {  // the output's row, element, and the two values
              float x = 0, y = 0;
              std::memcpy(&x, sequence[t].data() + at * 4, 4);
              std::memcpy(&y, fused[t].data() + at * 4, 4);
              where = ", row " + std::to_string(at / q_dim) + " element " + std::to_string(at % q_dim) +
                      ": sequence " + std::to_string(x) + ", fused " + std::to_string(y);
            }
            EXPECT_EQ(at, -1) << what << ": " << names[t] << where;
          }
          for (int r : {4, 11}) {  // a decode row alone (its own key only) is the same row in the batch
            const auto alone = run({r}, true);
            EXPECT_EQ(std::memcmp(alone[0].data(), fused[0].data() + r * q_dim * 4, static_cast<size_t>(q_dim) * 4), 0)
                << what << ": row " << r << " alone";
          }
        }
  }
}

// argmax_rows on the device gives the CPU backend's answer (the sampler's greedy rule): vocabulary-long
// rows with ties at the top, NaN at index 0 and elsewhere, signed zeros, rows of -inf or NaN, many rows.
TEST_F(CudaFusedTest, ArgmaxRowsIsTheCpuRule) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const int64_t n = 151936, rows = 12;
  std::mt19937 rng(45);
  std::uniform_real_distribution<float> d(-20, 20);
  std::vector<float> x(static_cast<size_t>(rows * n));
  for (float& v : x) v = std::round(d(rng) * 8) / 8;  // eighth steps: the maximum repeats
  auto row = [&](int64_t r) { return x.data() + r * n; };
  row(1)[0] = nan;
  row(2)[100000] = nan, row(2)[5] = 50.0f, row(2)[140000] = 50.0f;
  for (int64_t i = 0; i < n; ++i) row(3)[i] = -inf;
  for (int64_t i = 0; i < n; ++i) row(4)[i] = nan;
  for (int64_t i = 0; i < n; ++i) row(5)[i] = (i % 2) ? 0.0f : -0.0f;
  row(6)[n - 1] = inf;
  for (int64_t i = 0; i < n; ++i) row(7)[i] = i < 1000 ? nan : -1.0f;
  CpuBackend cpu(2);
  std::vector<int32_t> expected(static_cast<size_t>(rows));
  cpu.argmax_rows(Tensor(x.data(), DType::F32, {rows, n}), Tensor(expected.data(), DType::I32, {rows}));
  const Tensor dx = upload(x, DType::F32, {rows, n});
  for (int64_t count : {int64_t{1}, int64_t{5}, rows}) {
    const Tensor out = zeros({count}, DType::I32);
    backend_->argmax_rows(dx.first_rows(count), out);
    const std::vector<uint8_t> got = download(out);
    for (int64_t r = 0; r < count; ++r) {
      int32_t v;
      std::memcpy(&v, &got[static_cast<size_t>(r) * 4], 4);
      EXPECT_EQ(v, expected[static_cast<size_t>(r)]) << "row " << r << " of " << count;
    }
  }
}

// embedding_from on the device: rows with a source read the id an earlier op left on the device, the others
// their own; bitwise the CPU backend's rows, for each table dtype.
TEST_F(CudaFusedTest, EmbeddingFromIsTheCpuOp) {
  std::mt19937 rng(48);
  const int64_t vocab = 1000, dim = 4096, rows = 6;
  const std::vector<float> table_values = random_reals(rng, static_cast<size_t>(vocab * dim), -4.0f, 4.0f);
  std::vector<int32_t> ids = {3, 0, 999, 0, 0, 17}, sources = {-1, 1, -1, 0, 3, -1}, previous = {512, 7, 0, 998};
  CpuBackend cpu(2);
  const Tensor d_ids = ints(ids, {rows}), d_sources = ints(sources, {rows}), d_previous = ints(previous, {4});
  for (DType dtype : {DType::F32, DType::BF16}) {
    std::vector<uint8_t> host_table = encode(table_values, dtype);
    std::vector<float> expected(static_cast<size_t>(rows * dim));
    cpu.embedding_from(Tensor(host_table.data(), dtype, {vocab, dim}), Tensor(ids.data(), DType::I32, {rows}),
                       Tensor(sources.data(), DType::I32, {rows}), Tensor(previous.data(), DType::I32, {4}),
                       Tensor(expected.data(), DType::F32, {rows, dim}));
    const Tensor table = upload(table_values, dtype, {vocab, dim}), out = zeros({rows, dim});
    backend_->embedding_from(table, d_ids, d_sources, d_previous, out);
    const std::vector<uint8_t> got = download(out);
    EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size())) << dtype_name(dtype);
  }
}

// select_candidates on the device returns a superset of each row's best top_k (the CPU backend's exact
// set), with every x the host's logit / temperature, the right count of valid logits, and a set from
// which sample_from_candidates draws sample_token's token; rows of smooth logits, many ties, -inf,
// signed zeros, few valid ids, one dominant id; a row of equal values overflows (count above cap).
TEST_F(CudaFusedTest, SelectCandidatesHoldsTheBestTopK) {
  std::mt19937 rng(47);
  const int64_t cap = 2048;
  for (int64_t n : {int64_t{151936}, int64_t{1000}, int64_t{7}}) {
    const int64_t rows = 8;
    std::vector<float> x(static_cast<size_t>(rows * n));
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i) {
        float& v = x[static_cast<size_t>(r * n + i)];
        v = normal(rng);
        if (r == 1) v = std::round(v);
        if (r == 2 && i % 3 == 0) v = -INFINITY;
        if (r == 3 && i % 2 == 0) v = (i % 4 == 0) ? 0.0f : -0.0f;
        if (r == 4 && i % 97 != 5) v = -INFINITY;  // few valid ids
        if (r == 5 && i == n / 2) v = 80.0f;
        if (r == 6) v = 1.5f;                      // all equal: overflows a large row
        if (r == 7) v *= 150.0f;                   // terms down to 0 through the subnormals
      }
    const std::vector<float> temps = {0.7f, 1.0f, 0.3f, 1.3f, 0.9f, 0.5f, 1.0f, 0.8f};
    const std::vector<int32_t> ks = {20, 1, 256, 64, 40, 5, 20, 256};
    const Tensor logits = upload(x, DType::F32, {rows, n});
    const Tensor t = upload(temps, DType::F32, {rows});
    const Tensor k = zeros({rows}, DType::I32);
    backend_->copy_to_device(k, ks.data());
    const Tensor ox = zeros({rows, cap}), oid = zeros({rows, cap}, DType::I32), count = zeros({rows}, DType::I32),
                 valid = zeros({rows}, DType::I32), totals = zeros({rows}, DType::F64);
    backend_->select_candidates(logits, t, k, ox, oid, count, valid, totals);
    std::vector<float> gx(static_cast<size_t>(rows * cap));
    std::vector<int32_t> gid(static_cast<size_t>(rows * cap)), gcount(static_cast<size_t>(rows)), gvalid(static_cast<size_t>(rows));
    backend_->copy_to_host(gx.data(), ox);
    backend_->copy_to_host(gid.data(), oid);
    backend_->copy_to_host(gcount.data(), count);
    backend_->copy_to_host(gvalid.data(), valid);
    std::vector<double> gtotal(static_cast<size_t>(rows));
    backend_->copy_to_host(gtotal.data(), totals);
    backend_->synchronize();
    // The CPU backend's exact best top_k (the Backend default).
    CpuBackend cpu(2);
    std::vector<float> cx(static_cast<size_t>(rows * 256));
    std::vector<int32_t> cid(static_cast<size_t>(rows * 256)), ccount(static_cast<size_t>(rows)), cvalid(static_cast<size_t>(rows));
    cpu.select_candidates(Tensor(x.data(), DType::F32, {rows, n}), Tensor(const_cast<float*>(temps.data()), DType::F32, {rows}),
                          Tensor(const_cast<int32_t*>(ks.data()), DType::I32, {rows}), Tensor(cx.data(), DType::F32, {rows, 256}),
                          Tensor(cid.data(), DType::I32, {rows, 256}), Tensor(ccount.data(), DType::I32, {rows}),
                          Tensor(cvalid.data(), DType::I32, {rows}), Tensor());
    for (int64_t r = 0; r < rows; ++r) {
      const auto ri = static_cast<size_t>(r);
      EXPECT_EQ(gvalid[ri], cvalid[ri]) << "row " << r << " of " << n;
      const std::span<const float> row_logits(x.data() + r * n, static_cast<size_t>(n));
      const double want_total = softmax_total(row_logits, temps[ri]);
      EXPECT_EQ(std::memcmp(&gtotal[ri], &want_total, sizeof(double)), 0)
          << "row " << r << " of " << n << ": total " << gtotal[ri] << " against " << want_total;
      if (r == 6 && n > cap) {
        EXPECT_GT(gcount[ri], cap) << "equal values must overflow";
        continue;
      }
      ASSERT_LE(gcount[ri], cap) << "row " << r << " of " << n;
      const auto from = static_cast<std::ptrdiff_t>(ri * cap), to = from + gcount[ri];
      const std::vector<float> set_x(gx.begin() + from, gx.begin() + to);
      const std::vector<int32_t> set_ids(gid.begin() + from, gid.begin() + to);
      for (size_t j = 0; j < set_ids.size(); ++j) {
        const int32_t id = set_ids[j];
        ASSERT_TRUE(id >= 0 && id < n);
        EXPECT_EQ(set_x[j], x[static_cast<size_t>(r * n + id)] / temps[ri]) << "row " << r << " id " << id;
      }
      for (int32_t j = 0; j < ccount[ri]; ++j) {
        const int32_t id = cid[ri * 256 + static_cast<size_t>(j)];
        EXPECT_TRUE(std::find(set_ids.begin(), set_ids.end(), id) != set_ids.end())
            << "row " << r << " of " << n << " lacks id " << id << " (rank " << j << ")";
      }
      SamplingParams p;
      p.temperature = temps[ri];
      p.top_k = ks[ri];
      p.top_p = 0.9f;
      if (p.greedy()) continue;  // top_k 1 is greedy (the engine takes the argmax instead)
      SamplerScratch a, b;
      const std::vector<float> row(x.begin() + r * n, x.begin() + (r + 1) * n);
      const RowCandidates set{set_x, set_ids, gvalid[ri], ks[ri], gtotal[ri]};
      for (double u : {0.0, 0.4, 0.999}) {
        EXPECT_EQ(sample_from_candidates(set, p, u, static_cast<int32_t>(n), a), sample_token(row, p, {}, 0, u, b))
            << "row " << r << " of " << n << " u " << u;
        if (ks[ri] != Backend::kMaxSelectTopK) continue;
        // Without top_k: the best 256 and the device's total draw sample_token's token, or need the logits.
        SamplingParams whole = p;
        whole.top_k = 0;
        const int32_t got = sample_from_candidates(set, whole, u, static_cast<int32_t>(n), a);
        if (got >= 0) {
          EXPECT_EQ(got, sample_token(row, whole, {}, 0, u, b)) << "row " << r << " of " << n << " u " << u;
        }
        if (gvalid[ri] <= Backend::kMaxSelectTopK) {
          EXPECT_GE(got, 0) << "row " << r << " of " << n;
        }
      }
    }
  }
}

// select_candidates' broken preconditions abort naming the op, before any device work (no GPU needed):
// wrong dtypes, more rows than the decode path takes, per-row tensors of the wrong size, no scratch.
TEST(CudaFusedDeathTest, SelectCandidatesPreconditionsAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  alignas(16) static float fake[4096];
  auto* ints = reinterpret_cast<int32_t*>(fake + 2048);
  cuda::Context ctx;
  ctx.select_scratch = ints + 1024;
  const Tensor logits(fake, DType::F32, {2, 100}), temps(fake + 256, DType::F32, {2}), top_k(ints, DType::I32, {2});
  const Tensor x(fake + 512, DType::F32, {2, 16}), ids(ints + 16, DType::I32, {2, 16});
  const Tensor count(ints + 64, DType::I32, {2}), valid(ints + 72, DType::I32, {2});
  const char* message = "cuda select_candidates: check failed";
  EXPECT_DEATH(cuda::select_candidates(ctx, Tensor(ints, DType::I32, {2, 100}), temps, top_k, x, ids, count, valid, Tensor()), message);
  EXPECT_DEATH(cuda::select_candidates(ctx, logits, temps, top_k, Tensor(fake + 512, DType::F16, {2, 16}), ids, count, valid, Tensor()),
               message);
  EXPECT_DEATH(cuda::select_candidates(ctx, Tensor(fake, DType::F32, {65, 10}), temps, top_k, x, ids, count, valid, Tensor()), message);
  EXPECT_DEATH(cuda::select_candidates(ctx, logits, temps, Tensor(ints, DType::I32, {3}), x, ids, count, valid, Tensor()), message);
  EXPECT_DEATH(cuda::select_candidates(ctx, logits, temps, top_k, x, Tensor(ints + 16, DType::I32, {2, 8}), count, valid, Tensor()),
               message);
  cuda::Context no_scratch;
  EXPECT_DEATH(cuda::select_candidates(no_scratch, logits, temps, top_k, x, ids, count, valid, Tensor()), message);
  double totals[2];
  EXPECT_DEATH(cuda::select_candidates(ctx, logits, temps, top_k, x, ids, count, valid, Tensor(fake + 3000, DType::F32, {2})),
               message);
  EXPECT_DEATH(cuda::select_candidates(ctx, logits, temps, top_k, x, ids, count, valid, Tensor(totals, DType::F64, {2})),
               message);  // no group-sum scratch
}

// The backend's environment switches refuse malformed values by name at creation (a typo must not
// silently fall back to a default), and take the documented ones.
TEST(CudaBackendEnvironment, MalformedSwitchesAreRefusedByName) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  CudaBackendOptions options;
  options.max_rows = 8;
  options.max_context = 1024;
  options.max_k = 1024;
  const struct {
    const char* name;
    const char* bad;
    const char* good;
  } cases[] = {{"HELIUM_CUDA_STREAM_POLICY", "sideways", "normal"},
               {"HELIUM_CUDA_KV_POLICY", "last", "first"},
               {"HELIUM_CUDA_ATTN_PARTITIONS", "64", "0,0"},
               {"HELIUM_CUDA_ATTN_PARTITIONS", "0,8,4", "0,8,16"},
               {"HELIUM_CUDA_ATTN_PARTITIONS", "64,128x", "64,128"},
               {"HELIUM_CUDA_ATTN_PARTITIONS", "64,128,512,9", "64,128,512"},
               {"HELIUM_CUDA_ATTN_PARTITIONS", "4096,2048,4096,16384", "1024,2048,4096,16384"},
               {"HELIUM_CUDA_ATTN_PARTITIONS", "32,64,128,512,1024", "32,64,128,512"},
               {"HELIUM_CUDA_ATTN_RING", "deep", "wide"},
               {"HELIUM_CUDA_ATTN_SMEM_PAD_KB", "65", "8"},
               {"HELIUM_CUDA_ATTN_SPREAD", "wide", "off"},
               {"HELIUM_CUDA_MATMUL_TRIGGER", "middle", "end"},
               {"HELIUM_CUDA_ATTN_EARLY", "soon", "off"},
               {"HELIUM_CUDA_PREFILL_FUSED", "maybe", "off"},
               {"HELIUM_CUDA_XTILE_KB", "lots", "32"},
               {"HELIUM_CUDA_OMIT", "everything", "merge"},
               {"HELIUM_CUDA_MMA_EVICT_FIRST", "1", "off"},
               {"HELIUM_CUDA_MATMUL", "tensor", "mma"},
               {"HELIUM_CUDA_NORM_HANDOFF", "yes", "off"},
               {"HELIUM_CUDA_MMA_ONE_ROW", "5", "0"},
               {"HELIUM_CUDA_MMA_BLOCKS", "5", "4"},
               {"HELIUM_CUDA_MMA_SPREAD", "wide", "off"},
               {"HELIUM_CUDA_MMA_SPREAD_ROWS", "wide", "on"},
               {"HELIUM_CUDA_MMA_XSHARED", "8", "auto"},
               {"HELIUM_CUDA_MMA_XSHARED", "on", "4"},
               {"HELIUM_CUDA_MMA_XSHARED_STAGES", "6", "12"},
               {"HELIUM_CUDA_MMA_XSHARED_GROUPS", "8", "auto"},
               {"HELIUM_CUDA_ATTN_SPLIT", "yes", "off"},
               {"HELIUM_CUDA_PARTITION_LATE_KEYS", "soon", "0"},
               {"HELIUM_CUDA_MERGE_TRIGGER_KEYS", "-1", "0"},
               {"HELIUM_CUDA_CLUSTER_MERGE", "17", "0"},
               {"HELIUM_CUDA_CLUSTER_TRIGGER", "start", "loads"},
               {"HELIUM_CUDA_QKV_PROLOGUE", "fused", "off"},
               {"HELIUM_CUDA_ATTN_FUSED", "fused", "all"},
               {"HELIUM_CUDA_ATTN_FUSED_TRIGGER", "early", "late"},
               {"HELIUM_CUDA_ATTN_FUSED_MERGE", "129", "0"},
               {"HELIUM_CUDA_STREAM", "later", "off"},
               {"HELIUM_CUDA_STREAM_DIAG", "3", "2"},
               {"HELIUM_CUDA_STREAM_STAGE_K", "768", "1024"}};
  for (const auto& c : cases) {
    ASSERT_EQ(setenv(c.name, c.bad, 1), 0);
    auto refused = CudaBackend::create(options);
    EXPECT_FALSE(refused.is_ok()) << c.name << "=" << c.bad;
    if (!refused.is_ok()) {
      EXPECT_NE(refused.status().message().find(c.name), std::string::npos) << refused.status().message();
    }
    ASSERT_EQ(setenv(c.name, c.good, 1), 0);
    auto taken = CudaBackend::create(options);
    EXPECT_TRUE(taken.is_ok()) << c.name << "=" << c.good << ": " << (taken.is_ok() ? "" : taken.status().message());
    unsetenv(c.name);
  }
}

}  // namespace
}  // namespace helium::test
