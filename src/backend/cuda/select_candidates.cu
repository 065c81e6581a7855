// select_candidates (backend.h): a superset of each row's best top_k sampling candidates, found where the
// logits are, so that a sampled decode step copies a few hundred (x, id) pairs instead of a vocabulary.
//
// A row is cut into kSelectChunks chunks. Pass 1 takes each chunk's largest key (an order-preserving
// integer of x = logit / temperature over the logits > -inf; 0 for a chunk with none) and its count of
// such logits. Pass 2 finds tau, the top_k-th largest of the chunk keys: at least top_k candidates have a
// key >= tau (each of those chunks' largest), so every candidate ranked among the best top_k has one too,
// and the candidates with key >= tau are the set (appended through an atomic counter, in any order; the
// sampler ranks them). With fewer than top_k chunks holding a candidate, every candidate is taken. On
// smooth rows the set is a little larger than top_k (Gaussian logits over 152K ids, top_k 20: a few
// dozen); a row of many equal values may overflow the caller's capacity, which count reports.
//
// The softmax total (core/softmax_terms.h, the bits of softmax_total on the host), when asked for: x_max
// is the largest chunk key; pass 3 gives each group of kSelectSumIds ids a block, which computes the
// group's exp_det terms (0 for the logits that are not candidates: adding +0 to a sum of terms >= 0
// changes no bit, so the dense walk is the tree's sparse one) and adds them as the tree does — each run of
// 64 ids in increasing id from +0, then the runs' sums in order; pass 4 adds the groups' sums in order.
#include "backend/cuda/cuda_backend.h"  // kMaxDecodeRows
#include "backend/cuda/cuda_ops.cuh"
#include "core/softmax_terms.h"

namespace helium::cuda {
namespace {

constexpr int kSelectThreads = 256;

// Ascending in x, one key per float value (-0 is +0: they compare equal); every key of a value > -inf
// is above 0, which marks "none".
__device__ __forceinline__ uint32_t ascending_key(float x) {
  if (x == 0.0f) x = 0.0f;
  const uint32_t u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

struct SelectArgs {
  const float* logits;
  int64_t n, chunk;  // row length, ids per chunk
  const float* temperatures;
  const int32_t* top_k;
  float* x;
  int32_t* ids;
  int64_t cap;
  int32_t* count;
  int32_t* valid;
  uint32_t* chunk_key;     // (rows, kSelectChunks)
  int32_t* chunk_valid;    // (rows, kSelectChunks)
  double* group_sum;       // (rows, kSelectSumGroups)
  double* totals;          // (rows), or null
};

// ascending_key's inverse; key 0 ("none") gives -inf.
__device__ __forceinline__ float key_value(uint32_t key) {
  if (key == 0) return -INFINITY;
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

__device__ __forceinline__ uint32_t block_max_u32(uint32_t v, uint32_t* red) {
  for (int o = 16; o >= 1; o /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  uint32_t r = 0;
  for (int w = 0; w < kSelectThreads / 32; ++w) r = max(r, red[w]);
  return r;
}

// grid (kSelectChunks, rows).
__global__ void __launch_bounds__(kSelectThreads) select_chunk_max(const SelectArgs a) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  __shared__ uint32_t red[kSelectThreads / 32];
  __shared__ int red_valid[kSelectThreads / 32];
  const int64_t row = blockIdx.y, begin = blockIdx.x * a.chunk, end = min(begin + a.chunk, a.n);
  const float* logits = a.logits + row * a.n;
  const float t = a.temperatures[row];
  uint32_t best = 0;
  int valid = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kSelectThreads) {
    const float l = logits[i];
    if (l > -INFINITY) {
      best = max(best, ascending_key(__fdiv_rn(l, t)));
      ++valid;
    }
  }
  for (int o = 16; o >= 1; o /= 2) valid += __shfl_xor_sync(0xffffffffu, valid, o);
  if (threadIdx.x % 32 == 0) red_valid[threadIdx.x / 32] = valid;
  best = block_max_u32(best, red);
  if (threadIdx.x == 0) {
    int total = 0;
    for (int w = 0; w < kSelectThreads / 32; ++w) total += red_valid[w];
    a.chunk_key[row * kSelectChunks + blockIdx.x] = best;
    a.chunk_valid[row * kSelectChunks + blockIdx.x] = total;
    if (blockIdx.x == 0) a.count[row] = 0;
  }
}

// grid (kSelectChunks, rows): tau from the row's chunk keys (each block the same), then the chunk's
// candidates with key >= tau.
__global__ void __launch_bounds__(kSelectThreads) select_collect(const SelectArgs a) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  static_assert(kSelectChunks == kSelectThreads, "one chunk key per thread");
  __shared__ uint32_t s_key[kSelectChunks];
  __shared__ uint32_t s_tau;
  const int64_t row = blockIdx.y;
  const int k = a.top_k[row];
  const uint32_t mine = a.chunk_key[row * kSelectChunks + threadIdx.x];
  s_key[threadIdx.x] = mine;
  if (threadIdx.x == 0) s_tau = 1;  // fewer than k chunks hold a candidate: take them all
  __syncthreads();
  // This key's place in the descending order (equal keys by chunk index): the one at place k - 1 is tau.
  int place = 0;
  for (int j = 0; j < kSelectChunks; ++j) {
    const uint32_t other = s_key[j];
    place += other > mine || (other == mine && j < static_cast<int>(threadIdx.x));
  }
  if (place == k - 1 && mine > 0) s_tau = mine;
  __syncthreads();
  const uint32_t tau = s_tau;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    int total = 0;
    for (int c = 0; c < kSelectChunks; ++c) total += a.chunk_valid[row * kSelectChunks + c];
    a.valid[row] = total;
  }
  const int64_t begin = blockIdx.x * a.chunk, end = min(begin + a.chunk, a.n);
  const float* logits = a.logits + row * a.n;
  const float t = a.temperatures[row];
  for (int64_t i = begin + threadIdx.x; i < end; i += kSelectThreads) {
    const float l = logits[i];
    if (!(l > -INFINITY)) continue;
    const float x = __fdiv_rn(l, t);
    if (ascending_key(x) < tau) continue;
    const int slot = atomicAdd(&a.count[row], 1);
    if (slot < a.cap) {
      a.x[row * a.cap + slot] = x;
      a.ids[row * a.cap + slot] = static_cast<int32_t>(i);
    }
  }
}

// grid (groups, rows): group g's sum of the terms of ids [g · kSelectSumIds, (g + 1) · kSelectSumIds).
__global__ void __launch_bounds__(kSelectThreads) select_group_sums(const SelectArgs a) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  constexpr int kRun = 1 << kSumGroupShift, kRuns = kSelectSumIds / kRun, kPad = kRun + 1;  // padded: the summing threads' reads conflict at most 2-way
  static_assert(kSelectSumIds == kRun * kRun, "a group is the tree's second level");
  __shared__ uint32_t red[kSelectThreads / 32];
  __shared__ double s_term[kRuns * kPad];
  __shared__ double s_run[kRuns];
  const int64_t row = blockIdx.y;
  const float x_max = key_value(block_max_u32(a.chunk_key[row * kSelectChunks + threadIdx.x], red));
  const float* logits = a.logits + row * a.n;
  const float t = a.temperatures[row];
  const int64_t begin = int64_t{blockIdx.x} * kSelectSumIds;
  for (int i = threadIdx.x; i < kSelectSumIds; i += kSelectThreads) {
    double term = 0.0;
    if (begin + i < a.n) {
      const float l = logits[begin + i];
      if (l > -INFINITY) term = exp_det(static_cast<double>(__fdiv_rn(l, t)) - static_cast<double>(x_max));
    }
    s_term[(i / kRun) * kPad + i % kRun] = term;
  }
  __syncthreads();
  if (threadIdx.x < kRuns) {
    double sum = 0.0;
    for (int i = 0; i < kRun; ++i) sum = __dadd_rn(sum, s_term[threadIdx.x * kPad + i]);
    s_run[threadIdx.x] = sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double sum = 0.0;
    for (int r = 0; r < kRuns; ++r) sum = __dadd_rn(sum, s_run[r]);
    a.group_sum[row * kSelectSumGroups + blockIdx.x] = sum;
  }
}

// grid (rows): the row's total, its group sums added in order.
__global__ void select_total(const SelectArgs a, int groups) {
  pdl_wait();
  pdl_launch_dependents();
  if (threadIdx.x != 0) return;
  const int64_t row = blockIdx.x;
  double sum = 0.0;
  for (int g = 0; g < groups; ++g) sum = __dadd_rn(sum, a.group_sum[row * kSelectSumGroups + g]);
  a.totals[row] = sum;
}

}  // namespace

void select_candidates(const Context& c, const Tensor& logits, const Tensor& temperatures, const Tensor& top_k,
                       const Tensor& x, const Tensor& ids, const Tensor& count, const Tensor& valid, const Tensor& totals) {
  const char* op = "select_candidates";
  HELIUM_CUDA_REQUIRE(op, logits.dtype == DType::F32 && temperatures.dtype == DType::F32 && top_k.dtype == DType::I32);
  HELIUM_CUDA_REQUIRE(op, x.dtype == DType::F32 && ids.dtype == DType::I32 && count.dtype == DType::I32 &&
                              valid.dtype == DType::I32);
  const int64_t rows = rows_of(logits), n = cols_of(logits), cap = cols_of(x);
  HELIUM_CUDA_REQUIRE(op, rows <= kMaxDecodeRows && c.select_scratch != nullptr);
  HELIUM_CUDA_REQUIRE(op, temperatures.numel() == rows && top_k.numel() == rows && count.numel() == rows &&
                              valid.numel() == rows && rows_of(x) == rows && rows_of(ids) == rows && cols_of(ids) == cap);
  HELIUM_CUDA_REQUIRE(op, n < (int64_t{1} << 31));
  const bool want_totals = totals.data != nullptr;
  const int64_t groups = (n + kSelectSumIds - 1) / kSelectSumIds;
  HELIUM_CUDA_REQUIRE(op, !want_totals || (totals.dtype == DType::F64 && totals.numel() == rows &&
                                           groups <= kSelectSumGroups && c.select_sums != nullptr));
  if (rows == 0) return;
  SelectArgs a{};
  a.logits = logits.as<float>();
  a.n = n;
  a.chunk = (n + kSelectChunks - 1) / kSelectChunks;
  a.temperatures = temperatures.as<float>();
  a.top_k = top_k.as<int32_t>();
  a.x = x.as<float>();
  a.ids = ids.as<int32_t>();
  a.cap = cap;
  a.count = count.as<int32_t>();
  a.valid = valid.as<int32_t>();
  a.chunk_key = reinterpret_cast<uint32_t*>(c.select_scratch);
  a.chunk_valid = c.select_scratch + kMaxDecodeRows * kSelectChunks;
  a.group_sum = c.select_sums;
  a.totals = want_totals ? totals.as<double>() : nullptr;
  const dim3 grid(kSelectChunks, static_cast<unsigned>(rows));
  launch(c, select_chunk_max, grid, kSelectThreads, 0, a);
  HELIUM_CUDA_CHECK(cudaGetLastError());
  launch(c, select_collect, grid, kSelectThreads, 0, a);
  HELIUM_CUDA_CHECK(cudaGetLastError());
  if (!want_totals || n == 0) {
    if (want_totals) HELIUM_CUDA_CHECK(cudaMemsetAsync(a.totals, 0, sizeof(double) * rows, c.stream));
    return;
  }
  launch(c, select_group_sums, dim3(static_cast<unsigned>(groups), static_cast<unsigned>(rows)), kSelectThreads, 0, a);
  HELIUM_CUDA_CHECK(cudaGetLastError());
  launch(c, select_total, dim3(static_cast<unsigned>(rows)), 32, 0, a, static_cast<int>(groups));
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
