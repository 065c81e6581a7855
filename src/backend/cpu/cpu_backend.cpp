#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium {

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return "scalar";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
  }
  return "unknown";
}

Result<CpuIsa> parse_cpu_isa(std::string_view name) {
  for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512})
    if (name == cpu_isa_name(isa)) return isa;
  return Status::error("unknown CPU ISA '" + std::string(name) + "' (expected scalar, avx2 or avx512)");
}

bool cpu_supports(CpuIsa isa) {
  // __builtin_cpu_supports also checks that the OS saves the YMM/ZMM state (XCR0).
  switch (isa) {
    case CpuIsa::Scalar: return true;
    case CpuIsa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case CpuIsa::Avx512:
      return cpu_supports(CpuIsa::Avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq");
  }
  return false;
}

CpuIsa detect_cpu_isa() {
  if (cpu_supports(CpuIsa::Avx512)) return CpuIsa::Avx512;
  if (cpu_supports(CpuIsa::Avx2)) return CpuIsa::Avx2;
  return CpuIsa::Scalar;
}

Result<CpuIsa> default_cpu_isa() {
  CpuIsa best = detect_cpu_isa();
  const char* forced = std::getenv("HELIUM_CPU_ISA");
  if (forced == nullptr || *forced == '\0') return best;
  Result<CpuIsa> isa = parse_cpu_isa(forced);
  if (!isa) return isa.status().with_context("HELIUM_CPU_ISA");
  if (static_cast<int>(*isa) > static_cast<int>(best))
    return Status::error("HELIUM_CPU_ISA=" + std::string(forced) + " but this CPU supports at most " +
                         std::string(cpu_isa_name(best)));
  return isa;
}

namespace {

// Resolves the constructor's ISA argument, or says why it cannot be used.
Result<CpuIsa> resolve_isa(std::optional<CpuIsa> isa) {
  if (!isa) return default_cpu_isa();
  if (!cpu_supports(*isa))
    return Status::error("CPU ISA " + std::string(cpu_isa_name(*isa)) + " requested but this CPU supports at most " +
                         std::string(cpu_isa_name(detect_cpu_isa())));
  return *isa;
}

CpuIsa resolve_isa_or_abort(std::optional<CpuIsa> isa) {
  Result<CpuIsa> r = resolve_isa(isa);
  if (!r) {
    std::fprintf(stderr, "helium cpu backend: %s\n", r.error_message().c_str());
    std::abort();
  }
  return *r;
}

class HostBuffer final : public DeviceBuffer {
 public:
  HostBuffer(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  ~HostBuffer() override { std::free(data_); }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
};

constexpr size_t kAlignmentBytes = 64;

}  // namespace

CpuBackend::CpuBackend(int n_threads, std::optional<CpuIsa> isa)
    : CpuBackend(Checked{}, n_threads, resolve_isa_or_abort(isa)) {}

CpuBackend::CpuBackend(Checked, int n_threads, CpuIsa isa) : isa_(isa), pool_(n_threads) {}

Result<std::unique_ptr<CpuBackend>> CpuBackend::create(int n_threads, std::optional<CpuIsa> isa) {
  HELIUM_ASSIGN_OR_RETURN(CpuIsa resolved, resolve_isa(isa));
  return std::unique_ptr<CpuBackend>(new CpuBackend(Checked{}, n_threads, resolved));
}

std::string CpuBackend::name() const {
  return "cpu (" + std::string(cpu_isa_name(isa_)) + ", " + std::to_string(threads()) + " threads)";
}

Result<MemoryBandwidth> CpuBackend::measure_memory_bandwidth() {
  auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  const size_t n = (size_t{1} << 30) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n);
  pool_.parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i);
  });
  double best = 0;
  std::vector<uint64_t> sink(256);  // the sums are stored, so the reads cannot be left out
  for (int pass = 0; pass < 5; ++pass) {
    const double t0 = now();
    pool_.parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t b, int64_t e) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t i = b; i + 3 < e; i += 4) {
        s0 += buf[i];
        s1 += buf[i + 1];
        s2 += buf[i + 2];
        s3 += buf[i + 3];
      }
      sink[static_cast<size_t>(b / (1 << 16)) % sink.size()] = s0 + s1 + s2 + s3;
    });
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / (now() - t0));
  }
  return MemoryBandwidth{best, "multi-threaded read"};
}

Result<std::shared_ptr<DeviceBuffer>> CpuBackend::allocate(size_t bytes) {
  // aligned_alloc wants a multiple of the alignment; a zero-byte request still gets a unique pointer.
  size_t rounded = (bytes + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
  if (rounded < bytes) return Status::error("allocate: " + std::to_string(bytes) + " bytes overflows");
  if (rounded == 0) rounded = kAlignmentBytes;
  void* p = std::aligned_alloc(kAlignmentBytes, rounded);
  if (p == nullptr) return Status::error("allocate: out of host memory for " + std::to_string(bytes) + " bytes");
  return std::shared_ptr<DeviceBuffer>(std::make_shared<HostBuffer>(p, bytes));
}

Result<Tensor> CpuBackend::import_weight(const Tensor& host) {
  if (host.data == nullptr && host.numel() > 0)
    return Status::error("import_weight: null data for a tensor of shape " + host.shape_string());
  return host;
}

void CpuBackend::copy_to_device(Tensor dst, const void* host) {
  if (dst.bytes() > 0) std::memcpy(dst.data, host, dst.bytes());
}

void CpuBackend::copy_to_host(void* host, const Tensor& src) {
  if (src.bytes() > 0) std::memcpy(host, src.data, src.bytes());
}

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, Tensor out) {
  cpu::embedding({isa_, &pool_}, table, ids, out);
}
void CpuBackend::embedding_from(const Tensor& table, const Tensor& ids, const Tensor& sources, const Tensor& previous,
                                Tensor out) {
  cpu::embedding_from({isa_, &pool_}, table, ids, sources, previous, out);
}
void CpuBackend::matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y) {
  cpu::matmul({isa_, &pool_}, x, w, bias, y);
}
void CpuBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, bool zero_centred, Tensor y) {
  cpu::rms_norm({isa_, &pool_}, x, w, eps, zero_centred, y);
}
void CpuBackend::rope(Tensor x, int heads, const Tensor& positions, const Tensor& inv_freq,
                      const RopeParams& params) {
  cpu::rope({isa_, &pool_}, x, heads, positions, inv_freq, params);
}
void CpuBackend::kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor k_cache,
                          Tensor v_cache) {
  cpu::kv_write({isa_, &pool_}, k, v, slots, k_cache, v_cache);
}
void CpuBackend::attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                           const AttentionShape& shape, const AttentionLayout& layout, Tensor out) {
  if (layout.row_offsets.data != nullptr) {
    cpu::attention({isa_, &pool_}, q, k_cache, v_cache, shape, layout, out);
    return;
  }
  // The kernels read an explicit slot list per row: expand the paged form (prefix through the block
  // table, then the tree rows of the mask) in position order.
  const int64_t rows = layout.prefix_lens.numel();
  const int32_t* tables = layout.block_tables.as<int32_t>();
  const int64_t width = layout.block_tables.rank == 2 ? layout.block_tables.shape[1] : 0;
  const int32_t* row_table = layout.row_table.as<int32_t>();
  const int32_t* prefix = layout.prefix_lens.as<int32_t>();
  const auto* masks = static_cast<const uint64_t*>(layout.tree_masks.data);
  const int32_t* write_slots = layout.write_slots.as<int32_t>();
  const int32_t page = layout.page_size;
  attend_offsets_.assign(1, 0);
  attend_slots_.clear();
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* table = tables + static_cast<int64_t>(row_table[r]) * width;
    HELIUM_CHECK(cpu::OpDescription("attention", {{"q", &q}}), page > 0 && (prefix[r] + page - 1) / page <= width)
        << "row " << r << ": prefix " << prefix[r] << " exceeds its block table";
    for (int32_t p = 0; p < prefix[r]; ++p) attend_slots_.push_back(table[p / page] * page + p % page);
    if (masks != nullptr)
      for (int j = 0; j < 64; ++j)
        if ((masks[r] >> j) & 1u) attend_slots_.push_back(write_slots[j]);
    attend_offsets_.push_back(static_cast<int32_t>(attend_slots_.size()));
  }
  AttentionLayout explicit_layout = layout;
  explicit_layout.row_offsets = Tensor(attend_offsets_.data(), DType::I32, {rows + 1});
  explicit_layout.slots = Tensor(attend_slots_.data(), DType::I32, {static_cast<int64_t>(attend_slots_.size())});
  cpu::attention({isa_, &pool_}, q, k_cache, v_cache, shape, explicit_layout, out);
}
void CpuBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor out) {
  cpu::swiglu({isa_, &pool_}, gate, up, out);
}
void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor out) { cpu::add({isa_, &pool_}, a, b, out); }
void CpuBackend::argmax_rows(const Tensor& x, Tensor out) { cpu::argmax_rows({isa_, &pool_}, x, out); }
void CpuBackend::gather_rows(const Tensor& x, const Tensor& index, Tensor out) {
  cpu::gather_rows({isa_, &pool_}, x, index, out);
}

void CpuBackend::fill_random(Tensor t, uint64_t seed, float offset, float scale) {
  cpu::fill_random({isa_, &pool_}, t, seed, offset, scale);
}

void CpuBackend::copy_rows(Tensor x, const Tensor& src, const Tensor& dst) { cpu::copy_rows({isa_, &pool_}, x, src, dst); }

}  // namespace helium
