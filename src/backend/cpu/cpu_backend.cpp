#include "backend/cpu/cpu_backend.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

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
  cpu::attention({isa_, &pool_}, q, k_cache, v_cache, shape, layout, out);
}
void CpuBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor out) {
  cpu::swiglu({isa_, &pool_}, gate, up, out);
}
void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor out) { cpu::add({isa_, &pool_}, a, b, out); }
void CpuBackend::gather_rows(const Tensor& x, const Tensor& index, Tensor out) {
  cpu::gather_rows({isa_, &pool_}, x, index, out);
}

}  // namespace helium
