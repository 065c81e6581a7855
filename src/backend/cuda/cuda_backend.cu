#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/switches.h"

namespace helium {

using cuda::read_integer;
using cuda::read_switch;

namespace {

class CudaBuffer final : public DeviceBuffer {
 public:
  CudaBuffer(void* p, size_t n) : p_(p), n_(n) {}
  ~CudaBuffer() override { cudaFree(p_); }
  void* data() override { return p_; }
  size_t bytes() const override { return n_; }

 private:
  void* p_;
  size_t n_;
};

Status cuda_status(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::ok();
  return Status::error("CUDA: " + what + ": " + cudaGetErrorString(e));
}

class CudaGraph final : public OpGraph {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  void replay() override { HELIUM_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaBackend::~CudaBackend() {
  if (impl_ && impl_->ctx.stream) cudaStreamSynchronize(impl_->ctx.stream);
}

// A byte count from the environment in whole MiB (0..4096); unset or empty leaves `bytes` as it is.
static Status read_megabytes(const char* variable, int64_t& bytes) {
  long mb = -1;  // stays -1 when unset
  HELIUM_RETURN_IF_ERROR(read_integer(variable, "a whole number of MiB", 0, 4096, mb));
  if (mb >= 0) bytes = int64_t{mb} << 20;
  return Status::ok();
}

// The L2 policies of what a decode step reads once: the decode matmul's weights (Context::stream_evict_first,
// HELIUM_CUDA_STREAM_POLICY) and decode attention's keys and values (kv_evict_first, HELIUM_CUDA_KV_POLICY),
// each "first" (the default) or "normal" (no hint: the loads of earlier sessions). On the H200 (Qwen3-8B
// shape, 256 tokens, one run each; docs/benchmarks.md, fourth session): weights evict_first 193.5 / 178.5 /
// 146.3 tok/s at 1K / 8K / 32K against 188.5 / 176.8 / 144.1 without the hint; keys and values evict_first
// on top 193.3 / 180.9 / 149.6 (decode attention alone at 32K: 54.3 µs against 57.5).
static Status read_stream_policy(cuda::Context& ctx) {
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_STREAM_POLICY", "first", "normal", ctx.stream_evict_first));
  return read_switch("HELIUM_CUDA_KV_POLICY", "first", "normal", ctx.kv_evict_first);
}

// HELIUM_CUDA_OMIT=name,name,... (diagnostic; the model's output is garbage): the named kernels of a decode
// step are not launched, so that the decode benchmark, with and without each, gives what it costs inside
// the replayed graph (there is no timeline profiler on the GPU machine). Names: qkv, gate_up, lm_head, o,
// down, prologue, attention, merge, attn_math.
static Status read_omissions(cuda::Context& ctx) {
  ctx.omit = 0;
  const char* env = std::getenv("HELIUM_CUDA_OMIT");
  if (env == nullptr || *env == '\0') return Status::ok();
  static constexpr std::pair<std::string_view, unsigned> kNames[] = {
      {"qkv", cuda::kOmitQkv},         {"gate_up", cuda::kOmitGateUp},     {"lm_head", cuda::kOmitLmHead},
      {"o", cuda::kOmitO},             {"down", cuda::kOmitDown},          {"prologue", cuda::kOmitPrologue},
      {"attention", cuda::kOmitAttention}, {"merge", cuda::kOmitMerge}, {"attn_math", cuda::kOmitAttnMath}};
  std::string_view rest(env);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const auto* it = std::find_if(std::begin(kNames), std::end(kNames), [&](const auto& e) { return e.first == name; });
    if (it == std::end(kNames))
      return Status::error("HELIUM_CUDA_OMIT: unknown kernel '" + std::string(name) +
                           "' (qkv, gate_up, lm_head, o, down, prologue, attention, merge, attn_math)");
    ctx.omit |= it->second;
  }
  return Status::ok();
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(const CudaBackendOptions& o) {
  const int count = cuda_device_count();
  if (count == 0) return Status::error("no CUDA device is available (no GPU or no driver)");
  if (o.device < 0 || o.device >= count)
    return Status::error("CUDA device " + std::to_string(o.device) + " does not exist (" + std::to_string(count) +
                         " found)");
  auto impl = std::make_unique<Impl>();
  impl->options = o;
  HELIUM_RETURN_IF_ERROR(cuda_status(cudaSetDevice(o.device), "cudaSetDevice"));
  cudaDeviceProp prop{};
  HELIUM_RETURN_IF_ERROR(cuda_status(cudaGetDeviceProperties(&prop, o.device), "cudaGetDeviceProperties"));
  impl->info.name = prop.name;
  impl->info.sm_count = prop.multiProcessorCount;
  impl->info.l2_bytes = prop.l2CacheSize;
  impl->info.compute_capability = prop.major * 10 + prop.minor;
  impl->info.total_memory = prop.totalGlobalMem;
  cudaDriverGetVersion(&impl->info.driver_version);
  cudaRuntimeGetVersion(&impl->info.runtime_version);
  HELIUM_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&impl->ctx.stream, cudaStreamNonBlocking), "stream"));
  if (cublasLtCreate(&impl->ctx.lt) != CUBLAS_STATUS_SUCCESS) return Status::error("CUDA: cublasLtCreate failed");
  impl->ctx.sm_count = prop.multiProcessorCount;
  // On from sm_90 unless HELIUM_CUDA_PDL=0. The decode matmul loads its first weight rounds before it
  // waits for the previous kernel; with that, the H200 decoded 1.4-1.9% faster at 1K/8K/32K (Qwen3-8B
  // shape: 161.2 / 152.2 / 126.5 tok/s with it, 158.1 / 150.4 / 124.6 without; docs/benchmarks.md).
  const char* pdl = std::getenv("HELIUM_CUDA_PDL");
  impl->ctx.pdl = prop.major >= 9 && !(pdl != nullptr && std::string_view(pdl) == "0");
  impl->ctx.max_rows = o.max_rows;
  impl->ctx.max_context = o.max_context;
  HELIUM_RETURN_IF_ERROR(read_stream_policy(impl->ctx));
  HELIUM_RETURN_IF_ERROR(read_omissions(impl->ctx));
  // Where the decode matmul lets the next kernel launch: "start" (the default) or "end". On the H200
  // (Qwen3-8B shape, 256 tokens, one run each; docs/benchmarks.md, fifth session): start 199.7 / 153.7
  // tok/s at 1K / 32K, end 196.6 / 151.2 (the same tuned configurations); with the configurations the
  // tuner picks when it times with the early trigger too, 202.7 / 155.0 against 198.0 / 152.6.
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_MATMUL_TRIGGER", "start", "end", impl->ctx.matmul_early_trigger));
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_ATTN_EARLY", "on", "off", impl->ctx.attention_early_kv));
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_PROLOGUE_TRIGGER", "start", "wait", impl->ctx.prologue_early_trigger));
  long merge_trigger_keys = impl->ctx.merge_early_trigger_keys;
  HELIUM_RETURN_IF_ERROR(read_integer("HELIUM_CUDA_MERGE_TRIGGER_KEYS", "a key count", 0,
                                      std::numeric_limits<int>::max(), merge_trigger_keys));
  impl->ctx.merge_early_trigger_keys = static_cast<int>(merge_trigger_keys);
  long late_keys = impl->ctx.partition_late_trigger_keys;
  HELIUM_RETURN_IF_ERROR(read_integer("HELIUM_CUDA_PARTITION_LATE_KEYS", "a key count", 0,
                                      std::numeric_limits<int>::max(), late_keys));
  impl->ctx.partition_late_trigger_keys = static_cast<int>(late_keys);
  long cluster_merge = impl->ctx.attention_cluster_merge_max;
  HELIUM_RETURN_IF_ERROR(read_integer("HELIUM_CUDA_CLUSTER_MERGE", "a partition count", 0, 16, cluster_merge));
  impl->ctx.attention_cluster_merge_max = prop.major >= 9 ? static_cast<int>(cluster_merge) : 0;
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_CLUSTER_TRIGGER", "end", "loads", impl->ctx.cluster_merge_trigger_end));
  HELIUM_RETURN_IF_ERROR(cuda::read_matmul_switches(impl->ctx));
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_NORM_HANDOFF", "on", "off", impl->ctx.norm_handoff));
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_ATTN_SPLIT", "on", "off", impl->ctx.attention_split));
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_QKV_PROLOGUE", "on", "off", impl->ctx.qkv_prologue));
  if (const char* f = std::getenv("HELIUM_CUDA_ATTN_FUSED"); f != nullptr && *f) {
    const std::string_view v(f);
    if (v != "on" && v != "all" && v != "off")
      return Status::error("HELIUM_CUDA_ATTN_FUSED must be 'on', 'all' or 'off', not '" + std::string(v) + "'");
    impl->ctx.attention_fused = v == "on" ? cuda::Context::kFusedOneWave : v == "all" ? cuda::Context::kFusedAll
                                                                                    : cuda::Context::kFusedOff;
  }
  HELIUM_RETURN_IF_ERROR(
      read_switch("HELIUM_CUDA_ATTN_FUSED_TRIGGER", "start", "late", impl->ctx.attention_fused_early_trigger));
  long merge_parts = impl->ctx.attention_fused_merge_max_partitions;
  HELIUM_RETURN_IF_ERROR(read_integer("HELIUM_CUDA_ATTN_FUSED_MERGE", "a partition count", 0, 128, merge_parts));
  impl->ctx.attention_fused_merge_max_partitions = static_cast<int>(merge_parts);
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_PREFILL_FUSED", "on", "off", impl->ctx.prefill_fused));
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_SWIGLU_STORE", "on", "off", impl->ctx.swiglu_store));
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_MMA_EVICT_FIRST", "on", "off", impl->ctx.mma_evict_first));
  // HELIUM_CUDA_MATMUL=mma|fma: which kernel BF16 decode matmuls default to. It applies process-wide
  // (matmul_decode_default_config is a function of the shape, without a Context: matmul.cu reads it); here a
  // malformed value is refused like every other switch.
  bool tensor_cores = true;
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_MATMUL", "mma", "fma", tensor_cores));
  // The decode matmul's smallest x tile: 16 KB unless HELIUM_CUDA_XTILE_KB says otherwise (32 / 48 / 64 KB
  // ran 194.6 / 192.6 / 193.2 tok/s at 1K against 196.6 at 16 KB; the same run).
  if (const char* t = std::getenv("HELIUM_CUDA_XTILE_KB"); t != nullptr && *t) {
    const int kb = std::atoi(t);
    if (kb < 1 || kb > 200) return Status::error("HELIUM_CUDA_XTILE_KB must be 1..200");
    impl->ctx.x_tile_min_bytes = int64_t{kb} * 1024;
  }

  HELIUM_RETURN_IF_ERROR(read_megabytes("HELIUM_CUDA_PREFETCH_ATTN_MB", impl->ctx.prefetch_attention_bytes));
  if (const char* k = std::getenv("HELIUM_CUDA_PREFETCH_ATTN_KEYS"); k != nullptr && *k)
    impl->ctx.prefetch_attention_max_keys = std::atoll(k);

  std::unique_ptr<CudaBackend> backend(new CudaBackend(std::move(impl)));
  Impl& m = *backend->impl_;
  auto reserve = [&](size_t bytes, const char* what) -> Result<void*> {
    auto b = backend->allocate(std::max<size_t>(bytes, 256));
    if (!b.is_ok()) return b.status().with_context(what);
    m.owned.push_back(b.value());
    return b.value()->data();
  };
  HELIUM_ASSIGN_OR_RETURN(m.ctx.lt_workspace, reserve(o.cublas_workspace_bytes, "cuBLASLt workspace"));
  m.ctx.lt_workspace_bytes = o.cublas_workspace_bytes;
  if (const char* parts = std::getenv("HELIUM_CUDA_ATTN_PARTITIONS"); parts != nullptr && *parts) {
    if (!cuda::parse_partition_tiers(parts, m.ctx.attention_tiers))
      return Status::error(
          "HELIUM_CUDA_ATTN_PARTITIONS must be '[tiny_end,]small_end,medium_end[,large_end]' (keys, 0 <= "
          "tiny <= small <= medium <= large), not '" + std::string(parts) + "'");
  }
  // Decode attention's K/V ring: chosen per launch (attention.cu) unless HELIUM_CUDA_ATTN_RING=wide forces
  // the wide one (for comparisons); HELIUM_CUDA_ATTN_SMEM_PAD_KB pads its blocks' shared memory (diagnostic).
  bool wide_ring = m.ctx.attention_ring == cuda::Context::kRingWide;
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_ATTN_RING", "wide", "auto", wide_ring));
  m.ctx.attention_ring = wide_ring ? cuda::Context::kRingWide : cuda::Context::kRingAuto;
  long pad_kb = 0;
  HELIUM_RETURN_IF_ERROR(read_integer("HELIUM_CUDA_ATTN_SMEM_PAD_KB", "a whole number of KB", 0, 64, pad_kb));
  m.ctx.attention_smem_pad = static_cast<size_t>(pad_kb) << 10;
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_ATTN_SPREAD", "on", "off", m.ctx.attention_spread));
  m.reserved_tiers = m.ctx.attention_tiers;
  m.ctx.attention_scratch_floats = cuda::attention_scratch_floats(o.max_rows, o.max_heads, o.max_head_dim, o.max_context,
                                                                  m.ctx.attention_tiers);
  HELIUM_ASSIGN_OR_RETURN(void* att, reserve(m.ctx.attention_scratch_floats * sizeof(float), "attention scratch"));
  m.ctx.attention_scratch = static_cast<float*>(att);
  bool trace = false;
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_ATTN_TRACE", "1", "0", trace));
  if (trace) {
    // A launch's blocks are at most its partials (rows x query heads x partitions), which the attention op
    // checks fit the scratch at (head_dim + 2) floats each, and the stamping kernel's head_dim is at least 16.
    m.attention_trace_blocks = static_cast<int64_t>(m.ctx.attention_scratch_floats / 18);
    const size_t bytes = static_cast<size_t>(m.attention_trace_blocks) * cuda::kAttentionTraceEvents * 8;
    HELIUM_ASSIGN_OR_RETURN(void* stamps, reserve(bytes, "attention trace"));
    HELIUM_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(stamps, 0, bytes, m.ctx.stream), "attention trace"));
    m.ctx.attention_trace = static_cast<unsigned long long*>(stamps);
  }
  // The fused decode attention's counters (one per row and head group), zero between its launches.
  m.ctx.attention_counter_count = int64_t{kMaxDecodeRows} * o.max_heads;
  HELIUM_ASSIGN_OR_RETURN(void* counters, reserve(sizeof(int) * m.ctx.attention_counter_count, "attention counters"));
  // On the backend's own stream (non-blocking: it does not wait for the legacy stream a plain cudaMemset
  // would use), finished before any kernel can count.
  HELIUM_RETURN_IF_ERROR(cuda_status(
      cudaMemsetAsync(counters, 0, sizeof(int) * m.ctx.attention_counter_count, m.ctx.stream), "attention counters"));
  HELIUM_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(m.ctx.stream), "attention counters"));
  m.ctx.attention_counters = static_cast<int*>(counters);
  // The q/k/v projection's per-head counters (rms_norm_qkv_prologue), zero between its launches.
  m.ctx.prologue_count_capacity = 3 * o.max_heads;
  HELIUM_ASSIGN_OR_RETURN(void* heads, reserve(sizeof(int) * m.ctx.prologue_count_capacity, "prologue counters"));
  HELIUM_RETURN_IF_ERROR(cuda_status(
      cudaMemsetAsync(heads, 0, sizeof(int) * m.ctx.prologue_count_capacity, m.ctx.stream), "prologue counters"));
  HELIUM_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(m.ctx.stream), "prologue counters"));
  m.ctx.prologue_counts = static_cast<int*>(heads);
  // The layer stream (cuda_ops.cuh, Context::stream_queue; sm_90, where it was measured): off unless
  // HELIUM_CUDA_STREAM=on, not yet faster than the kernel-per-op step (docs/benchmarks.md, seventeenth and
  // eighteenth sessions).
  bool layer_stream = false;
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_STREAM", "on", "off", layer_stream));
  if (layer_stream && prop.major >= 9) {
    const size_t bytes = sizeof(int) * cuda::stream_counter_count();
    HELIUM_ASSIGN_OR_RETURN(void* sc, reserve(bytes, "layer stream counters"));
    HELIUM_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(sc, 0, bytes, m.ctx.stream), "layer stream counters"));
    HELIUM_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(m.ctx.stream), "layer stream counters"));
    m.ctx.stream_counters = static_cast<int*>(sc);
    m.ctx.stream_queue = cuda::make_stream_queue();
  }
  long stream_diag = 0;
  HELIUM_RETURN_IF_ERROR(read_integer("HELIUM_CUDA_STREAM_DIAG", "0, 1 or 2", 0, 2, stream_diag));
  m.ctx.stream_diag = static_cast<int>(stream_diag);
  // The layer stream's stage: 1024 of k (of 256 / 512 / 1024: 193.9 / 178.4 / 121.5 tok/s at 1K with the
  // stream on; docs/benchmarks.md, eighteenth session).
  long stage_k = 1024;
  HELIUM_RETURN_IF_ERROR(read_integer("HELIUM_CUDA_STREAM_STAGE_K", "256, 512 or 1024", 256, 1024, stage_k));
  if (stage_k != 256 && stage_k != 512 && stage_k != 1024)
    return Status::error("HELIUM_CUDA_STREAM_STAGE_K must be 256, 512 or 1024, not '" + std::to_string(stage_k) + "'");
  m.ctx.stream_reps = static_cast<int>(stage_k / 256);
  m.ctx.argmax_capacity = std::max(o.max_rows, kMaxDecodeRows);
  HELIUM_ASSIGN_OR_RETURN(void* keys, reserve(sizeof(unsigned long long) * m.ctx.argmax_capacity, "argmax keys"));
  m.ctx.argmax_keys = static_cast<unsigned long long*>(keys);
  HELIUM_ASSIGN_OR_RETURN(void* select, reserve(sizeof(int32_t) * 2 * kMaxDecodeRows * cuda::kSelectChunks,
                                                "candidate selection"));
  m.ctx.select_scratch = static_cast<int32_t*>(select);
  HELIUM_ASSIGN_OR_RETURN(void* sums, reserve(sizeof(double) * kMaxDecodeRows * cuda::kSelectSumGroups,
                                              "candidate selection sums"));
  m.ctx.select_sums = static_cast<double*>(sums);
  m.ctx.matmul_scratch_bytes = cuda::matmul_scratch_bytes(o.max_rows, o.max_k);
  if (m.ctx.matmul_scratch_bytes > 0) {
    HELIUM_ASSIGN_OR_RETURN(m.ctx.matmul_scratch, reserve(m.ctx.matmul_scratch_bytes, "matmul scratch"));
    m.ctx.matmul_split_region = cuda::matmul_split_region_bytes(o.max_rows, o.max_k);
  }
  m.pinned_bytes = size_t{64} << 20;
  HELIUM_RETURN_IF_ERROR(cuda_status(cudaMallocHost(reinterpret_cast<void**>(&m.pinned), m.pinned_bytes), "pinned staging"));
  return Result<std::unique_ptr<CudaBackend>>(std::move(backend));
}

const CudaDeviceInfo& CudaBackend::device_info() const { return impl_->info; }

double CudaBackend::measure_copy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) {
    cudaGetLastError();
    cudaFree(a);
    return 0;
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  float best_ms = 1e30f;
  for (int i = 0; i < 11; ++i) {
    cudaEventRecord(start, impl_->ctx.stream);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, impl_->ctx.stream);
    cudaEventRecord(stop, impl_->ctx.stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i > 0) best_ms = std::min(best_ms, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * static_cast<double>(bytes) / (best_ms * 1e-3);
}

Result<MemoryBandwidth> CudaBackend::measure_memory_bandwidth() {
  const double bytes_per_second = measure_copy_bandwidth();
  if (bytes_per_second <= 0) return Status::error(name() + ": no room for the 2 GiB of the bandwidth measurement");
  return MemoryBandwidth{bytes_per_second, "device-to-device copy, bytes read + written"};
}

std::string CudaBackend::name() const {
  return "cuda (" + impl_->info.name + ", sm_" + std::to_string(impl_->info.compute_capability) + ")";
}

Result<std::shared_ptr<DeviceBuffer>> CudaBackend::allocate(size_t bytes) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    return Status::error("CUDA: cannot allocate " + std::to_string(bytes) + " bytes (" + std::to_string(free_bytes) +
                         " free of " + std::to_string(total) + "): " + cudaGetErrorString(e));
  }
  return std::shared_ptr<DeviceBuffer>(std::make_shared<CudaBuffer>(p, bytes));
}

Result<Tensor> CudaBackend::import_weight(const Tensor& host) {
  HELIUM_ASSIGN_OR_RETURN(auto buffer, allocate(host.bytes()));
  HELIUM_RETURN_IF_ERROR(cuda_status(cudaMemcpy(buffer->data(), host.data, host.bytes(), cudaMemcpyHostToDevice),
                                     "weight upload"));
  impl_->owned.push_back(buffer);
  Tensor t = host;
  t.data = buffer->data();
  return t;
}

void CudaBackend::copy_to_device(Tensor dst, const void* host) {
  impl_->forget_hints();
  cuda::flush_stream(impl_->ctx);  // a queued matmul may read what this overwrites
  const size_t bytes = dst.bytes();
  if (bytes == 0) return;
  uint8_t* staged = impl_->stage(bytes);
  if (staged == nullptr) {  // larger than the staging ring: a plain (synchronous for pageable) copy
    HELIUM_CUDA_CHECK(cudaMemcpyAsync(dst.data, host, bytes, cudaMemcpyHostToDevice, impl_->ctx.stream));
    return;
  }
  std::memcpy(staged, host, bytes);
  HELIUM_CUDA_CHECK(cudaMemcpyAsync(dst.data, staged, bytes, cudaMemcpyHostToDevice, impl_->ctx.stream));
}

void CudaBackend::copy_to_host(void* host, const Tensor& src) {
  cuda::flush_stream(impl_->ctx);
  const size_t bytes = src.bytes();
  if (bytes == 0) return;
  uint8_t* staged = impl_->stage(bytes);
  if (staged == nullptr) {
    HELIUM_CUDA_CHECK(cudaMemcpyAsync(host, src.data, bytes, cudaMemcpyDeviceToHost, impl_->ctx.stream));
    return;
  }
  HELIUM_CUDA_CHECK(cudaMemcpyAsync(staged, src.data, bytes, cudaMemcpyDeviceToHost, impl_->ctx.stream));
  impl_->downloads.push_back({host, staged, bytes});
}

void CudaBackend::synchronize() {
  cuda::flush_stream(impl_->ctx);
  HELIUM_CUDA_CHECK(cudaStreamSynchronize(impl_->ctx.stream));
  impl_->drained();
}

uint64_t CudaBackend::mark() {
  cuda::flush_stream(impl_->ctx);
  Impl& m = *impl_;
  cudaEvent_t event = nullptr;
  if (!m.spare_events.empty()) {
    event = m.spare_events.back();
    m.spare_events.pop_back();
  } else {
    HELIUM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  HELIUM_CUDA_CHECK(cudaEventRecord(event, m.ctx.stream));
  m.marks.push_back({++m.last_mark, event, m.downloads.size()});
  return m.last_mark;
}

void CudaBackend::wait_for(uint64_t mark) {
  Impl& m = *impl_;
  auto it = std::find_if(m.marks.begin(), m.marks.end(), [&](const Impl::Mark& k) { return k.id == mark; });
  if (it == m.marks.end()) return;  // reached already (by an earlier wait or a synchronize)
  HELIUM_CUDA_CHECK(cudaEventSynchronize(it->event));
  // The downloads enqueued before this mark have landed in the staging ring: hand them over.
  const size_t done = it->downloads;
  for (size_t i = 0; i < done; ++i) std::memcpy(m.downloads[i].dst, m.downloads[i].staged, m.downloads[i].bytes);
  m.downloads.erase(m.downloads.begin(), m.downloads.begin() + static_cast<std::ptrdiff_t>(done));
  ++it;
  for (auto k = m.marks.begin(); k != it; ++k) m.spare_events.push_back(k->event);
  m.marks.erase(m.marks.begin(), it);
  for (Impl::Mark& k : m.marks) k.downloads -= done;
}

bool CudaBackend::supports_graphs() const {
  const char* env = std::getenv("HELIUM_CUDA_GRAPHS");
  return env == nullptr || std::string(env) != "0";
}

void CudaBackend::begin_capture() {
  impl_->forget_hints();
  cuda::flush_stream(impl_->ctx);
  HELIUM_CUDA_CHECK(cudaStreamBeginCapture(impl_->ctx.stream, cudaStreamCaptureModeThreadLocal));
}

Result<std::unique_ptr<OpGraph>> CudaBackend::end_capture() {
  cuda::flush_stream(impl_->ctx);
  cudaGraph_t graph = nullptr;
  HELIUM_RETURN_IF_ERROR(cuda_status(cudaStreamEndCapture(impl_->ctx.stream, &graph), "end of graph capture"));
  cudaGraphExec_t exec = nullptr;
  Status st = cuda_status(cudaGraphInstantiate(&exec, graph, 0), "graph instantiation");
  cudaGraphDestroy(graph);
  HELIUM_RETURN_IF_ERROR(st);
  return std::unique_ptr<OpGraph>(std::make_unique<CudaGraph>(exec, impl_->ctx.stream));
}

CudaBackend::StreamCounts CudaBackend::layer_stream_counts() const {
  StreamCounts counts;
  cuda::stream_queue_counts(impl_->ctx.stream_queue, counts.phases, counts.launches);
  return counts;
}

static_assert(CudaBackend::kAttentionTraceEvents == cuda::kAttentionTraceEvents);

std::vector<uint64_t> CudaBackend::take_attention_trace() {
  Impl& m = *impl_;
  if (m.ctx.attention_trace == nullptr) return {};
  const size_t n = static_cast<size_t>(m.attention_trace_blocks) * cuda::kAttentionTraceEvents;
  std::vector<uint64_t> out(n);
  cuda::flush_stream(m.ctx);
  HELIUM_CUDA_CHECK(cudaStreamSynchronize(m.ctx.stream));
  HELIUM_CUDA_CHECK(cudaMemcpy(out.data(), m.ctx.attention_trace, n * 8, cudaMemcpyDeviceToHost));
  HELIUM_CUDA_CHECK(cudaMemsetAsync(m.ctx.attention_trace, 0, n * 8, m.ctx.stream));
  HELIUM_CUDA_CHECK(cudaStreamSynchronize(m.ctx.stream));
  return out;
}

int64_t CudaBackend::qkv_prologue_count() const { return impl_->qkv_prologues; }
int64_t CudaBackend::attention_split_count() const { return impl_->attention_splits; }

void CudaBackend::embedding(const Tensor& table, const Tensor& ids, Tensor out) {
  impl_->forget_hints();
  cuda::embedding(impl_->ctx, table, ids, Tensor(), Tensor(), out);
}
void CudaBackend::embedding_from(const Tensor& table, const Tensor& ids, const Tensor& sources, const Tensor& previous,
                                 Tensor out) {
  impl_->forget_hints();
  cuda::embedding(impl_->ctx, table, ids, sources, previous, out);
}
void CudaBackend::matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y) {
  impl_->forget_hints();
  const Impl::Enqueue enqueue(impl_->ctx);
  cuda::matmul(impl_->ctx, x, w, bias, y);
}

// Sets the hint only: a handoff written for the op after next (o_proj's, for the MLP whose down the hint is
// for) stays.
void CudaBackend::prepare_norm(const Tensor& x, const Tensor& norm_w, bool zero_centred) {
  impl_->pending_norm = {x.data, norm_w, zero_centred};
}

// Sets the hint only, for the next op (decode attention takes it).
void CudaBackend::prefetch(const Tensor& w, int stacked) {
  impl_->pending_prefetch = {w, stacked};
}

// x's split when the attention op before wrote it for x (o_proj after decode attention: no split kernel).
void CudaBackend::matmul_add(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor scratch, Tensor y) {
  cuda::NormHandoff slot;
  const cuda::NormHandoff* next = impl_->take_pending(y, slot);
  const __nv_bfloat16* presplit = impl_->take_split(x);
  impl_->forget_hints();
  if (impl_->ctx.omit & cuda::kOmitO) return;
  const Impl::Enqueue enqueue(impl_->ctx);
  bool took_split = false;
  if (cuda::matmul_add(impl_->ctx, x, w, bias, scratch, y, next, presplit, &took_split)) impl_->wrote(y, slot);
  if (took_split) ++impl_->attention_splits;
}

void CudaBackend::matmul_split(const Tensor& x, const Tensor& w, const Tensor& bias, std::span<const Tensor> ys) {
  impl_->forget_hints();
  const Impl::Enqueue enqueue(impl_->ctx);
  cuda::matmul_split(impl_->ctx, x, w, bias, ys);
}
void CudaBackend::rms_norm_matmul_split(const Tensor& x, const Tensor& norm_w, float eps, bool zero_centred,
                                        Tensor xn_scratch, const Tensor& w, const Tensor& bias,
                                        std::span<const Tensor> ys) {
  cuda::NormHandoff handoff;
  const cuda::NormHandoff* pre = impl_->take_ready(x, norm_w, zero_centred, handoff);
  impl_->forget_hints();
  const unsigned which = ys.size() == 3 ? cuda::kOmitQkv : ys.size() == 2 ? cuda::kOmitGateUp : cuda::kOmitLmHead;
  if (impl_->ctx.omit & which) return;
  const Impl::Enqueue enqueue(impl_->ctx);
  cuda::rms_norm_matmul_split(impl_->ctx, x, norm_w, eps, zero_centred, xn_scratch, w, bias, ys, pre);
}
void CudaBackend::swiglu_matmul_add(Tensor gate, const Tensor& up, const Tensor& w, const Tensor& bias, Tensor scratch,
                                    Tensor y) {
  impl_->forget_hints();
  if (impl_->ctx.omit & cuda::kOmitDown) return;
  cuda::swiglu_matmul_add(impl_->ctx, gate, up, w, bias, scratch, y);
}
// Decode rows: the gate/up matmul stores the activation itself (its warps hold the gate and the up rows of
// the same positions), so the down matmul stages x as it is — no per-block SwiGLU of 2 · inter values read
// back from the L2. Bitwise the default sequence.
void CudaBackend::swiglu_mlp_add(Tensor x, const Tensor& norm_w, float eps, bool zero_centred, Tensor xn_scratch,
                                 const Tensor& w_gate_up, const Tensor& gate_up_bias, Tensor gate, Tensor up,
                                 const Tensor& w_down, const Tensor& down_bias) {
  // The handoff o_proj wrote for this norm (gate/up reads it) and the hint for down (to write one for the
  // next layer's norm), both taken here whichever path runs.
  cuda::NormHandoff pre_slot, next_slot;
  const cuda::NormHandoff* pre = impl_->take_ready(x, norm_w, zero_centred, pre_slot);
  const cuda::NormHandoff* next = impl_->take_pending(x, next_slot);
  impl_->forget_hints();
  if (!impl_->ctx.swiglu_store || (impl_->ctx.omit & (cuda::kOmitGateUp | cuda::kOmitDown)) != 0 ||
      !cuda::rms_norm_matmul_swiglu_fusable(x, w_gate_up)) {
    Backend::swiglu_mlp_add(x, norm_w, eps, zero_centred, xn_scratch, w_gate_up, gate_up_bias, gate, up, w_down,
                            down_bias);
    return;
  }
  bool wrote_next = false;
  const Impl::Enqueue enqueue(impl_->ctx);
  if (cuda::rms_norm_swiglu_mlp_add(impl_->ctx, x, norm_w, eps, zero_centred, w_gate_up, gate_up_bias, gate, w_down,
                                    down_bias, pre, next, &wrote_next)) {
    if (wrote_next) impl_->wrote(x, next_slot);
    return;
  }
  cuda::rms_norm_matmul_swiglu(impl_->ctx, x, norm_w, eps, zero_centred, w_gate_up, gate_up_bias, gate);
  cuda::matmul_add(impl_->ctx, gate, w_down, down_bias, xn_scratch, x);
}
void CudaBackend::qk_norm_rope_kv_write(Tensor q, Tensor k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm,
                                        float eps, int n_heads, int n_kv_heads, const Tensor& positions,
                                        const Tensor& inv_freq, const RopeParams& rope, const Tensor& slots,
                                        Tensor k_cache, Tensor v_cache) {
  impl_->forget_hints();
  if (impl_->ctx.omit & cuda::kOmitPrologue) return;
  cuda::qk_norm_rope_kv_write(impl_->ctx, q, k, v, q_norm, k_norm, eps, n_heads, n_kv_heads, positions, inv_freq, rope,
                              slots, k_cache, v_cache);
}
// One kernel for decode rows (cuda::attention_with_prologue: the attention blocks do the prologue's work);
// otherwise the two ops. The same bits either way.
void CudaBackend::qk_norm_rope_attention(Tensor q, Tensor k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm,
                                         float eps, const Tensor& positions, const Tensor& inv_freq,
                                         const RopeParams& rope, Tensor k_cache, Tensor v_cache,
                                         const AttentionShape& shape, const AttentionLayout& layout, Tensor out) {
  const cuda::L2Prefetch during = impl_->take_prefetch(impl_->ctx.prefetch_attention_bytes);
  impl_->forget_hints();
  __nv_bfloat16* split = impl_->attention_split_for(out);
  bool wrote = false;
  if (cuda::attention_with_prologue(impl_->ctx, q, k, v, q_norm, k_norm, eps, positions, inv_freq, rope, k_cache,
                                    v_cache, shape, layout, out, during, split, &wrote)) {
    impl_->wrote_split(wrote, out, split);
    return;
  }
  if (!(impl_->ctx.omit & cuda::kOmitPrologue))
    cuda::qk_norm_rope_kv_write(impl_->ctx, q, k, v, q_norm, k_norm, eps, shape.n_heads, shape.n_kv_heads, positions,
                                inv_freq, rope, layout.write_slots, k_cache, v_cache);
  impl_->attention(q, k_cache, v_cache, shape, layout, out, during);
}
// Decode rows (1-4) with HELIUM_CUDA_QKV_PROLOGUE=on (Context::qkv_prologue): the q/k/v projection does the
// prologue in its stores (cuda::rms_norm_qkv_prologue), then attention; otherwise the two ops. The same bits
// either way.
void CudaBackend::rms_norm_qkv_attention(const Tensor& x, const Tensor& norm_w, float eps, Tensor xn_scratch,
                                         const Tensor& w_qkv, const Tensor& qkv_bias, Tensor q, Tensor k, Tensor v,
                                         const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
                                         const Tensor& inv_freq, const RopeParams& rope, Tensor k_cache, Tensor v_cache,
                                         const AttentionShape& shape, const AttentionLayout& layout, Tensor out) {
  const bool fused_attention = impl_->ctx.attention_fused != cuda::Context::kFusedOff;  // it does the prologue
  if (fused_attention || (impl_->ctx.omit & (cuda::kOmitQkv | cuda::kOmitPrologue))) {
    const Impl::PendingPrefetch prefetch = impl_->pending_prefetch;  // for the attention, past the projection
    const Tensor qkv[] = {q, k, v};
    rms_norm_matmul_split(x, norm_w, eps, false, xn_scratch, w_qkv, qkv_bias, qkv);
    impl_->pending_prefetch = prefetch;
    qk_norm_rope_attention(q, k, v, q_norm, k_norm, eps, positions, inv_freq, rope, k_cache, v_cache, shape, layout, out);
    return;
  }
  cuda::NormHandoff handoff;
  const cuda::NormHandoff* pre = impl_->take_ready(x, norm_w, false, handoff);
  const cuda::L2Prefetch during = impl_->take_prefetch(impl_->ctx.prefetch_attention_bytes);
  impl_->forget_hints();
  bool done;
  {
    const Impl::Enqueue enqueue(impl_->ctx);
    done = cuda::rms_norm_qkv_prologue(impl_->ctx, x, norm_w, eps, w_qkv, qkv_bias, q, k, v, q_norm, k_norm,
                                       shape.n_heads, shape.n_kv_heads, positions, inv_freq, rope, layout.write_slots,
                                       k_cache, v_cache, pre);
    if (!done) {
      const Tensor qkv[] = {q, k, v};
      cuda::rms_norm_matmul_split(impl_->ctx, x, norm_w, eps, false, xn_scratch, w_qkv, qkv_bias, qkv, pre);
    }
  }
  if (done) ++impl_->qkv_prologues;
  else
    cuda::qk_norm_rope_kv_write(impl_->ctx, q, k, v, q_norm, k_norm, eps, shape.n_heads, shape.n_kv_heads, positions,
                                inv_freq, rope, layout.write_slots, k_cache, v_cache);
  impl_->attention(q, k_cache, v_cache, shape, layout, out, during);
}
void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, bool zero_centred, Tensor y) {
  impl_->forget_hints();
  cuda::rms_norm(impl_->ctx, x, w, eps, zero_centred, y);
}
void CudaBackend::rope(Tensor x, int heads, const Tensor& positions, const Tensor& inv_freq, const RopeParams& params) {
  impl_->forget_hints();
  cuda::rope(impl_->ctx, x, heads, positions, inv_freq, params);
}
void CudaBackend::kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor k_cache, Tensor v_cache) {
  impl_->forget_hints();
  cuda::kv_write(impl_->ctx, k, v, slots, k_cache, v_cache);
}
void CudaBackend::attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const AttentionShape& shape,
                            const AttentionLayout& layout, Tensor out) {
  const cuda::L2Prefetch during = impl_->take_prefetch(impl_->ctx.prefetch_attention_bytes);
  impl_->forget_hints();
  impl_->attention(q, k_cache, v_cache, shape, layout, out, during);
}
void CudaBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor out) {
  impl_->forget_hints();
  cuda::swiglu(impl_->ctx, gate, up, out);
}
void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor out) {
  impl_->forget_hints();
  cuda::add(impl_->ctx, a, b, out);
}
void CudaBackend::gather_rows(const Tensor& x, const Tensor& index, Tensor out) {
  impl_->forget_hints();
  cuda::gather_rows(impl_->ctx, x, index, out);
}
void CudaBackend::argmax_rows(const Tensor& x, Tensor out) {
  impl_->forget_hints();
  cuda::argmax_rows(impl_->ctx, x, out);
}
void CudaBackend::select_candidates(const Tensor& logits, const Tensor& temperatures, const Tensor& top_k, Tensor x,
                                    Tensor ids, Tensor count, Tensor valid, Tensor totals) {
  impl_->forget_hints();
  cuda::select_candidates(impl_->ctx, logits, temperatures, top_k, x, ids, count, valid, totals);
}
void CudaBackend::copy_rows(Tensor x, const Tensor& src, const Tensor& dst) {
  impl_->forget_hints();
  cuda::copy_rows(impl_->ctx, x, src, dst);
}
void CudaBackend::fill_random(Tensor t, uint64_t seed, float offset, float scale) {
  impl_->forget_hints();
  cuda::fill_random(impl_->ctx, t, seed, offset, scale);
}

namespace cuda {

L2Prefetch l2_prefetch_of(const Tensor& w, int stacked, int64_t cap) {
  L2Prefetch pf;
  if (w.data == nullptr || cap <= 0 || (stacked != 1 && stacked != 2)) return pf;
  const int64_t part = static_cast<int64_t>(w.bytes()) / stacked;
  const int64_t each = std::min(part, cap / stacked) / 16 * 16;
  for (int i = 0; i < stacked; ++i) {
    const char* start = static_cast<const char*>(w.data) + i * part;
    if (reinterpret_cast<uintptr_t>(start) % 16 != 0) return {};  // bulk prefetches take 16-byte aligned ranges
    pf.data[i] = start;
    pf.bytes[i] = each;
  }
  return pf;
}

}  // namespace cuda
}  // namespace helium
