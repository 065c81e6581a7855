// backend/cpu/cpu_backend.h — the CPU backend: host memory and the op set of backend.h on x86-64.
// Owns: CpuBackend, the choice of instruction set (scalar reference, AVX2+FMA+F16C, AVX-512) and the
// thread pool its ops run on. Each op lives in its own file (matmul.cpp, attention.cpp, ...) with a scalar
// reference kernel; SIMD kernels live in <op>_avx2.cpp / <op>_avx512.cpp and are only called when the CPU
// reported the features at run time.
// Must not: know about models, files or requests; allocate, log or block inside an op.
//
// Batch invariance (DESIGN.md invariant 2). For a given CpuIsa, every op's output row i is bitwise the same
// whether computed alone or among any number of rows, and for any thread count: work is split over rows
// and output features only; a reduction (a dot product over k, a norm over dim, softmax over a row's key
// slots) runs in one order that depends only on its own length. Different CpuIsa values may differ in the
// last bits (they sum in different lane orders).
//
// Threads. Calls into one CpuBackend must come from one thread at a time: every op runs on the backend's
// ThreadPool, whose parallel_for is not reentrant. Separate CpuBackend objects are independent.
//
// Preconditions. The ops are `void`, so a broken precondition aborts the process with a message naming
// the op, the condition and all shapes (check.h). "Rows" below is the product of all but the last
// dimension of an activation tensor, so (rows, heads, head_dim) views are accepted where (rows,
// heads * head_dim) is. All tensors must be non-null unless marked optional.
//   embedding   table (vocab, dim) F32/F16/BF16; ids (rows) I32 with 0 <= id < vocab; out (rows, dim) F32.
//   embedding_from  as embedding, with sources (rows) I32: -1 (ids[r]) or an index into previous (I32),
//               whose value must be a valid id.
//   matmul      x (rows, k) F32; w (n, k) F32/F16/BF16, rank 2, k > 0; bias (n) F32/F16/BF16 or empty
//               (data == nullptr); y (rows, n) F32, not overlapping x, w or bias.
//   rms_norm    x (rows, dim) F32; w (dim) F32/F16/BF16; eps >= 0; y shaped like x, F32, either x itself
//               or not overlapping it.
//   rope        x (rows, heads * head_dim) F32; positions (rows) I32; inv_freq (rot_dim / 2) F32;
//               0 < rot_dim <= head_dim, rot_dim even.
//   kv_write    k, v (rows, kv_dim) F32; slots (rows) I32 with 0 <= slot < cache slots; k_cache, v_cache
//               (slots, kv_dim), both F32 or both BF16 (rounded to nearest even).
//   attention   q (rows, n_heads * head_dim) F32; k_cache, v_cache (slots, n_kv_heads * head_dim), both F32
//               or both BF16; n_heads % n_kv_heads == 0; layout.row_offsets (rows + 1) I32, non-decreasing,
//               every row with at least one slot, all offsets within layout.slots (total) I32 whose
//               values lie in [0, cache slots); out (rows, n_heads * head_dim) F32, not overlapping q or
//               the caches.
//   swiglu      gate, up, out (rows, n) F32, same shape; out may be gate itself.
//   add         a, b, out F32, same shape; out may be a or b itself.
//   copy_rows   x (rows, dim) any dtype; src, dst (n) I32 in [0, rows); dst rows distinct, none a src row.
//   gather_rows x (rows, dim) any dtype; index (n) I32 with 0 <= index < rows; out (n, dim) of x's dtype,
//               not overlapping x.
//   argmax_rows x (rows, n) F32, n >= 1; out (rows) I32.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace helium {

// Instruction sets the CPU kernels come in, lowest first. Avx2 means AVX2 + FMA + F16C; Avx512 means
// AVX-512 F/BW/VL/DQ (plus FMA, F16C).
enum class CpuIsa { Scalar, Avx2, Avx512 };

std::string_view cpu_isa_name(CpuIsa isa);  // "scalar", "avx2", "avx512"
Result<CpuIsa> parse_cpu_isa(std::string_view name);
// The best CpuIsa this CPU (and OS) supports, from __builtin_cpu_supports.
CpuIsa detect_cpu_isa();
bool cpu_supports(CpuIsa isa);
// detect_cpu_isa(), lowered by the environment variable HELIUM_CPU_ISA=scalar|avx2|avx512 when set. A value
// that is unknown or names an ISA this CPU lacks is an error (never silently replaced).
Result<CpuIsa> default_cpu_isa();

class CpuBackend final : public Backend {
 public:
  // n_threads counts the calling thread (0: all hardware threads). isa: nullopt picks default_cpu_isa();
  // an explicit ISA must be one the CPU supports. Either failing aborts with a message; use create() to
  // get the error as a value instead.
  explicit CpuBackend(int n_threads = 0, std::optional<CpuIsa> isa = std::nullopt);
  static Result<std::unique_ptr<CpuBackend>> create(int n_threads = 0,
                                                    std::optional<CpuIsa> isa = std::nullopt);

  CpuIsa isa() const { return isa_; }
  int threads() const { return pool_.size(); }

  std::string name() const override;
  // Every pool thread sums its share of a 1 GiB buffer; the best of 5 passes.
  Result<MemoryBandwidth> measure_memory_bandwidth() override;
  // 64-byte aligned host memory (one cache line, one AVX-512 vector).
  Result<std::shared_ptr<DeviceBuffer>> allocate(size_t bytes) override;
  // Zero copy: returns `host` itself; the caller keeps the memory alive while the weight is used.
  Result<Tensor> import_weight(const Tensor& host) override;
  void copy_to_device(Tensor dst, const void* host) override;
  void copy_to_host(void* host, const Tensor& src) override;
  void synchronize() override {}  // ops run eagerly on the calling thread (and the pool)

  void embedding(const Tensor& table, const Tensor& ids, Tensor out) override;
  void embedding_from(const Tensor& table, const Tensor& ids, const Tensor& sources, const Tensor& previous,
                      Tensor out) override;
  void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, bool zero_centred, Tensor y) override;
  void rope(Tensor x, int heads, const Tensor& positions, const Tensor& inv_freq,
            const RopeParams& params) override;
  void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor k_cache,
                Tensor v_cache) override;
  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const AttentionShape& shape,
                 const AttentionLayout& layout, Tensor out) override;
  void swiglu(const Tensor& gate, const Tensor& up, Tensor out) override;
  void add(const Tensor& a, const Tensor& b, Tensor out) override;
  void gather_rows(const Tensor& x, const Tensor& index, Tensor out) override;
  void argmax_rows(const Tensor& x, Tensor out) override;
  void copy_rows(Tensor x, const Tensor& src, const Tensor& dst) override;
  void fill_random(Tensor t, uint64_t seed, float offset, float scale) override;

 private:
  struct Checked {};
  CpuBackend(Checked, int n_threads, CpuIsa isa);

  CpuIsa isa_;
  ThreadPool pool_;
  // The explicit slot lists attention() expands a paged layout into; reused across calls, they only grow.
  std::vector<int32_t> attend_offsets_, attend_slots_;
};

}  // namespace helium
