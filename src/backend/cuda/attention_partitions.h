// backend/cuda/attention_partitions.h — how the CUDA decode attention cuts a row's keys into split-KV
// partitions (attention.cu), in plain C++ so that the memory plan (engine/memory_plan.cpp) sizes the
// partials' scratch by the same rule the kernels use.
//
// A row of n keys is cut into partitions of P keys aligned to position 0, P = 32 up to tiny_end keys (none by
// default), 64 up to small_end, 128 up to medium_end, 256 up to large_end, kMaxPartitionKeys (512) beyond:
// short contexts still spread over many blocks (a 1K row of a model with 8 KV heads gets 128 blocks instead
// of 32), long ones keep few partials to merge and few enough blocks to be resident at once (a 32K row of 8
// KV heads: 512 blocks, one wave on the H200's 132 multiprocessors at four blocks each, where 256-key
// partitions made 1,024 and two waves). P is a function of the row's own key count, never of the batch: a row
// alone, in a batch, or as a tree row at the same position is cut the same way (bitwise batch invariance).
//
// The thresholds come from helium_bench_cuda_attention on the H200 (Qwen3-8B shape, 1 row, µs per layer,
// P = 64 / 128 / 256 forced everywhere; docs/benchmarks.md, seventh session): 1K 9.0 / 10.2 / 13.0,
// 2K 10.8 / 10.0 / 13.4, 4K 15.3 / 12.7 / 13.2, 8K 25.7 / 19.2 / 16.9, 32K 81.2 / 60.0 / 49.9 — 64 wins
// at 1K, 128 at 2K and 4K, 256 beyond (the third session's sweep ranked them the same way). 512 past 16K:
// docs/benchmarks.md, fifteenth session. Since a one-wave grid loads its keys before its wait (ninth
// session), a 64-key partition's whole K and V (four 8 KB chunks) are in flight before it, a 128-key one's
// half: 64 keys now run up to 2K. On an H100 (decode at 1K, keys 1,025-1,536; twenty-ninth session) the
// protocol's 512 tokens, median of 3, three alternating rounds: 175.29 / 175.41 / 173.74 tok/s against
// 174.30 / 174.05 / 173.87 with 128-key partitions past 1K (256-token sweeps: 174.18 / 174.87 against
// 173.00 / 173.43).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#if defined(__CUDACC__)
#define HELIUM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define HELIUM_HOST_DEVICE inline
#endif

namespace helium::cuda {

inline constexpr int kMaxPartitionKeys = 512;

// Where each partition size ends (keys of a row); the defaults are Context::attention_tiers'.
struct PartitionTiers {
  int small_end = 2048;   // 64-key partitions up to here
  int medium_end = 4096;  // 128
  int large_end = 16384;  // 256; kMaxPartitionKeys beyond
  // 32-key partitions up to here (0: none; the first tier whatever the others say). Last, so that the
  // {small, medium, large} initialisers keep their meaning.
  int tiny_end = 0;
};

HELIUM_HOST_DEVICE int partition_keys(int n_keys, const PartitionTiers& t) {
  if (n_keys <= t.tiny_end) return 32;
  return n_keys <= t.small_end ? 64 : n_keys <= t.medium_end ? 128 : n_keys <= t.large_end ? 256 : kMaxPartitionKeys;
}

HELIUM_HOST_DEVICE int partition_count(int n_keys, const PartitionTiers& t) {
  const int p = partition_keys(n_keys, t);
  return (n_keys + p - 1) / p;
}

// The most partitions a row of at most max_keys keys has: the count grows within each tier, so the
// largest is at a tier's end or at max_keys.
inline int64_t max_partition_count(int64_t max_keys, const PartitionTiers& t) {
  int64_t most = 0;
  for (int64_t end :
       {int64_t{t.tiny_end}, int64_t{t.small_end}, int64_t{t.medium_end}, int64_t{t.large_end}, max_keys})
    if (end > 0 && max_keys > 0)
      most = std::max<int64_t>(most, partition_count(static_cast<int>(std::min(end, max_keys)), t));
  return most;
}

// The longest partition a row of at most max_keys keys gets.
inline int max_partition_keys(int64_t max_keys, const PartitionTiers& t) {
  return partition_keys(static_cast<int>(std::min<int64_t>(max_keys, 1 << 30)), t);
}

// HELIUM_CUDA_ATTN_PARTITIONS's value (a diagnostic override of the tiers): "small_end,medium_end",
// "small_end,medium_end,large_end" or "tiny_end,small_end,medium_end,large_end", whole numbers of keys with
// 0 <= tiny <= small <= medium <= large <= 2^30 and nothing else (a stray character refuses the value). Two
// numbers keep the default large_end unless medium_end passes it; fewer than four, no 32-key partitions.
// False, and `out` untouched, for anything else.
inline bool parse_partition_tiers(const char* text, PartitionTiers& out) {
  if (text == nullptr) return false;
  long ends[4] = {0, 0, 0, 0};
  int n = 0;
  for (const char* at = text;; ++at) {
    if (*at < '0' || *at > '9') return false;  // no sign, no space: strtol would take them
    char* end = nullptr;
    const long v = std::strtol(at, &end, 10);
    if (end == at || n == 4 || v < 0 || v > (1L << 30)) return false;
    ends[n++] = v;
    at = end;
    if (*at == '\0') break;
    if (*at != ',') return false;
  }
  if (n < 2) return false;
  const long* e = n == 4 ? ends + 1 : ends;  // small_end first
  PartitionTiers t;
  t.tiny_end = n == 4 ? static_cast<int>(ends[0]) : 0;
  t.small_end = static_cast<int>(e[0]);
  t.medium_end = static_cast<int>(e[1]);
  t.large_end = n >= 3 ? static_cast<int>(e[2]) : std::max(t.medium_end, PartitionTiers{}.large_end);
  if (t.small_end < t.tiny_end || t.medium_end < t.small_end || t.large_end < t.medium_end) return false;
  out = t;
  return true;
}

// The tiers the CUDA backend will use: the defaults, or HELIUM_CUDA_ATTN_PARTITIONS where set (a malformed
// value gives the defaults here; the backend refuses it when it starts).
inline PartitionTiers partition_tiers_in_force() {
  PartitionTiers t;
  if (const char* v = std::getenv("HELIUM_CUDA_ATTN_PARTITIONS"); v != nullptr && *v) parse_partition_tiers(v, t);
  return t;
}

}  // namespace helium::cuda

#undef HELIUM_HOST_DEVICE
