// backend/cuda/tune.cu — start-up autotuning of the decode matmul configurations (issue: launch
// configurations are chosen by timing candidates on the actual GPU for the model's own shapes, cached
// per GPU, driver and model).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "core/cache_dir.h"
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/switches.h"
#include "backend/cuda/tune.h"

namespace helium {
namespace {

// The rule that picks a configuration from the timings (below); a cache written under another rule is
// timed again. 2: among equal rings, the most warps per block; 3: each shape's x-shared row groups timed.
constexpr int kSelectionRuleRevision = 3;
// The attention tuner's (timing and rule): a cache written by another revision is timed again.
constexpr int kAttentionTuneRevision = 3;

// Puts a Context field back as it was on every way out of the tuner (or to `kept`, where the tuner sets it).
template <class T>
struct RestoredOnExit {
  T& field;
  T kept = field;
  ~RestoredOnExit() { field = kept; }
};

std::string sanitize(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
  return s;
}

// $HELIUM_CACHE_DIR/tune/<gpu>_sm<cc>_driver<version>_<kind><hash of key>.json: a tuning cache file of this
// device, one per key (what the choice depends on besides the device).
std::string cache_file_path(const CudaDeviceInfo& info, const char* kind, const std::string& key) {
  std::ostringstream name;
  name << sanitize(info.name) << "_sm" << info.compute_capability << "_driver" << info.driver_version << "_" << kind
       << std::hex << std::hash<std::string>{}(key) << ".json";
  return helium_cache_dir() + "/tune/" + name.str();
}

// The device a tuning cache file was timed on, its first fields.
nlohmann::json cache_file_header(const CudaDeviceInfo& info) {
  return {{"gpu", info.name}, {"compute_capability", info.compute_capability}, {"driver", info.driver_version}};
}

// A tuning cache file's JSON; nothing for a file that is missing or not JSON.
std::optional<nlohmann::json> read_cache_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// Writes a tuning cache file; one that cannot be written only costs a re-tune at the next start.
void write_cache_file(const std::string& path, const nlohmann::json& j) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream(path) << j.dump(1) << "\n";
}

nlohmann::json config_to_json(const cuda::MatmulDecodeConfig& c) {
  return {{"features_per_lane", c.features_per_lane}, {"rounds_in_flight", c.rounds_in_flight},
          {"feature_warps", c.feature_warps}, {"k_warps", c.k_warps}, {"mma_stages", c.mma_stages}};
}

}  // namespace

// The fastest, except that among the candidates within kTuneTieFraction of it the one with the largest
// weight ring per block wins: timed alone, configurations a few percent apart trade places from run to
// run, and in the decode graph the larger ring was the faster (H200, Qwen3-8B gate_up: 4 x 4 rounds on
// 2 x 4 warps, a 64 KB ring, gave 203.5 tok/s at 1K; 2 x 4 rounds on 2 x 4 warps, 32 KB, 197.6 — in two
// calls whose tuners had timed them 49.4 and 48.3 us; docs/benchmarks.md, fifth session). Rings past
// kTuneMaxRingBytes are not taken at all: such a block has a multiprocessor to itself, and timed alone it
// can win, but among the other kernels of a step it loses (gate_up at 4 x 8 rounds on 4 x 2 warps, a
// 128 KB ring: a layer's four matmuls 114.6 us against 104.2 with 64 KB rings, decode at 1K 195 tok/s
// against 204; eighth session). Among rings of one size, the most warps per block: timed alone, gate_up
// at 4 x 8 rounds on 2 x 2 warps (128 threads) beat 4 x 4 rounds on 2 x 4 warps by under 3%, and in the
// decode graph it lost 7% (the same machine, two rounds: 1K 191.8 / 191.6 tok/s against 206.7 / 207.5,
// 32K 154.6 / 154.3 against 165.2 / 165.3; tenth session) — the work between a kernel's wait and its
// first weight (staging x, the RMSNorm) runs on the block's threads.
cuda::MatmulDecodeConfig cuda::choose_decode_config(std::span<const std::pair<MatmulDecodeConfig, float>> timed,
                                                    DType w_dtype,
                                                    const MatmulDecodeConfig& fallback, float* chosen_us) {
  float fastest = 1e30f;
  for (const auto& [cand, us] : timed)
    if (static_cast<int64_t>(matmul_decode_ring_bytes(cand, w_dtype)) <= kTuneMaxRingBytes) fastest = std::min(fastest, us);
  MatmulDecodeConfig best = fallback;
  int64_t best_ring = -1;
  int best_warps = 0;
  float best_us = 1e30f;
  for (const auto& [cand, us] : timed) {
    const int64_t ring = static_cast<int64_t>(matmul_decode_ring_bytes(cand, w_dtype));
    if (ring > kTuneMaxRingBytes || us > fastest * (1.0f + kTuneTieFraction)) continue;
    const int warps = cand.feature_warps * cand.k_warps;
    if (ring > best_ring || (ring == best_ring && (warps > best_warps || (warps == best_warps && us < best_us)))) {
      best_ring = ring;
      best_warps = warps;
      best_us = us;
      best = cand;
    }
  }
  if (chosen_us != nullptr) *chosen_us = best_ring < 0 ? 0.0f : best_us;
  return best;
}

// Whether the x-shared kernel takes a shape's 9-64-row launches is timed rather than set: at 64 rows (four
// row groups) it streams the weights once where the default kernel streams them four times, while across all
// shapes at 17-32 rows (two) it lost on an H100 (thirty-second session: batched decode at 32 rows 1,935 ->
// 1,887 tok/s), and where the crossing lies depends on the shape and the GPU (docs/benchmarks.md,
// thirty-third session: gate/up and lm_head from 9 rows, q/k/v from 33, o_proj and down from 49 on an H200).
// Taken from the largest count down, so that more rows never leave the x-shared kernel once fewer take it.
int cuda::choose_x_shared_from_groups(std::span<const XSharedTiming> timed) {
  std::vector<XSharedTiming> by_groups(timed.begin(), timed.end());
  std::sort(by_groups.begin(), by_groups.end(),
            [](const XSharedTiming& a, const XSharedTiming& b) { return a.groups > b.groups; });
  int from = kXSharedNever;
  for (const XSharedTiming& t : by_groups) {
    if (!(t.x_shared_us < t.default_us * (1.0f - kTuneTieFraction))) break;
    from = t.groups;
  }
  return from;
}

Result<std::vector<cuda::MatmulDecodeShapeConfig>> cuda::read_matmul_tuning(const nlohmann::json& cache) {
  std::vector<MatmulDecodeShapeConfig> entries;
  try {
    const nlohmann::json& shapes = cache.at("shapes");
    if (!shapes.is_array()) return Status::error("'shapes' is not a list");
    for (size_t i = 0; i < shapes.size(); ++i) {
      const nlohmann::json& e = shapes[i];
      const std::string at = "shape " + std::to_string(i) + ": ";
      MatmulDecodeShapeConfig sc;
      sc.n = e.at("n").get<int64_t>();
      sc.k = e.at("k").get<int64_t>();
      const std::optional<DType> dtype = dtype_from_name(e.at("dtype").get<std::string>());
      if (!dtype) return Status::error(at + "unknown dtype " + e.at("dtype").dump());
      sc.w_dtype = *dtype;
      const nlohmann::json& c = e.at("config");
      sc.config = {c.at("features_per_lane").get<int>(), c.at("rounds_in_flight").get<int>(),
                   c.at("feature_warps").get<int>(), c.at("k_warps").get<int>(), c.at("mma_stages").get<int>()};
      if (sc.n <= 0 || sc.k <= 0 || !matmul_decode_config_valid(sc.config, sc.w_dtype))
        return Status::error(at + "no such configuration " + c.dump());
      sc.x_shared_from_groups = e.value("x_shared_from_groups", 0);
      if (sc.x_shared_from_groups < 0 || sc.x_shared_from_groups > kXSharedNever)
        return Status::error(at + "x-shared row groups out of 0.." + std::to_string(kXSharedNever));
      entries.push_back(sc);
    }
  } catch (const nlohmann::json::exception& e) {  // a field missing or of the wrong type
    return Status::error(e.what());
  }
  return entries;
}

cuda::PartitionTiers cuda::choose_partition_tiers(std::span<const PartitionTiming> timed,
                                                  const PartitionTiers& current) {
  std::vector<int> key_counts;
  for (const PartitionTiming& t : timed) key_counts.push_back(t.keys);
  std::sort(key_counts.begin(), key_counts.end());
  key_counts.erase(std::unique(key_counts.begin(), key_counts.end()), key_counts.end());
  if (key_counts.empty()) return current;
  // Each tier's end: the most keys whose choice was its size or a smaller one (-1: none yet).
  int64_t end[3] = {-1, -1, -1};  // 64, 128, 256
  int chosen = 0;
  for (int keys : key_counts) {
    const int kept = partition_keys(keys, current);
    float fastest = 1e30f, kept_us = -1.0f;
    int fastest_size = 0;
    for (const PartitionTiming& t : timed) {
      if (t.keys != keys) continue;
      if (t.us < fastest) fastest = t.us, fastest_size = t.partition_keys;
      if (t.partition_keys == kept) kept_us = t.us;
    }
    const int size = kept_us >= 0.0f && kept_us <= fastest * (1.0f + kTuneTieFraction) ? kept : fastest_size;
    chosen = std::max(chosen, size);
    for (int tier = 0; tier < 3; ++tier)
      if (chosen <= (64 << tier)) end[tier] = keys;
  }
  PartitionTiers t;
  t.small_end = static_cast<int>(std::max<int64_t>(end[0], 0));
  t.medium_end = static_cast<int>(std::max<int64_t>(end[1], t.small_end));
  t.large_end = static_cast<int>(std::max<int64_t>(end[2], t.medium_end));
  return t;
}

int cuda::choose_oproj_stages(std::span<const OprojTiming> timed, int current) {
  float fastest = 1e30f, current_us = -1.0f;
  int fastest_stages = current;
  for (const OprojTiming& t : timed) {
    if (t.us < fastest) fastest = t.us, fastest_stages = t.stages;
    if (t.stages == current) current_us = t.us;
  }
  return current_us >= 0.0f && current_us <= fastest * (1.0f + kOprojTieFraction) ? current : fastest_stages;
}

Result<cuda::AttentionTuning> cuda::read_attention_tuning(const nlohmann::json& cache, int64_t max_context,
                                                          int64_t max_partitions) {
  AttentionTuning tuning;
  PartitionTiers& t = tuning.tiers;
  try {
    const nlohmann::json& tiers = cache.at("tiers");
    const std::string text = std::to_string(tiers.at("small_end").get<int64_t>()) + "," +
                             std::to_string(tiers.at("medium_end").get<int64_t>()) + "," +
                             std::to_string(tiers.at("large_end").get<int64_t>());
    if (!parse_partition_tiers(text.c_str(), t)) return Status::error("tiers " + text + " out of order or range");
    if (cache.contains("oproj_stages")) {
      tuning.oproj_stages = cache.at("oproj_stages").get<int>();
      if (!is_oproj_stages_choice(tuning.oproj_stages))
        return Status::error("oproj_stages " + std::to_string(tuning.oproj_stages) + " is not " +
                             kOprojStagesListed);
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::error(e.what());
  }
  if (max_partition_count(max_context, t) > max_partitions)
    return Status::error("tiers give more than " + std::to_string(max_partitions) + " partitions at " +
                         std::to_string(max_context) + " keys");
  return tuning;
}

std::string CudaBackend::tuning_cache_path(const std::vector<MatmulShape>& shapes) const {
  std::ostringstream key;
  // The kernel's revision: a choice timed on an earlier decode kernel is measured again, not reused.
  key << "decode-kernel-" << cuda::kMatmulDecodeKernelRevision << ";rule-" << kSelectionRuleRevision << ';';
  // The kernel each shape defaults to (HELIUM_CUDA_MATMUL=fma keeps BF16 on the FMA kernel): its own cache.
  for (const auto& s : shapes)
    key << s.n << 'x' << s.k << dtype_name(s.dtype) << 'm' << cuda::matmul_decode_default_config(s.n, s.k, s.dtype).mma_stages
        << ';';
  return cache_file_path(impl_->info, "", key.str());
}

Status CudaBackend::tune_matmuls(const std::vector<MatmulShape>& shapes, bool retune) {
  Impl& m = *impl_;
  const std::string path = tuning_cache_path(shapes);
  m.matmul_table.entries.clear();
  if (!retune) {
    // A damaged cache is re-measured (and rewritten), not trusted.
    if (auto cached = read_cache_file(path); cached.has_value()) {
      if (auto entries = cuda::read_matmul_tuning(*cached); entries.is_ok()) {
        m.matmul_table.entries = std::move(entries.value());
        m.ctx.matmul_decode_table = &m.matmul_table;
        return Status::ok();
      }
    }
  }
  // Time each candidate at one row (the decode case) on random inputs, on the four-row instance of the
  // tensor-core kernel whose depth the table sets (launches of 2-4 rows; one-row launches take the one-row
  // instance at Context::mma_one_row_stages, a depth chosen in the decode graph: docs/benchmarks.md).
  const RestoredOnExit<int> four_row{m.ctx.mma_one_row_stages};
  m.ctx.mma_one_row_stages = 0;
  nlohmann::json out = cache_file_header(m.info);
  out["shapes"] = nlohmann::json::array();
  cudaEvent_t start, stop;
  HELIUM_CUDA_CHECK(cudaEventCreate(&start));
  HELIUM_CUDA_CHECK(cudaEventCreate(&stop));
  for (const MatmulShape& s : shapes) {
    bool seen = false;
    for (const auto& e : m.matmul_table.entries) seen |= e.n == s.n && e.k == s.k && e.w_dtype == s.dtype;
    if (seen) continue;
    // In a forward every weight comes from HBM (a layer's weights are read once per step, and all of
    // them are many times the L2): the calls rotate over copies of w that together exceed 4x the L2, so
    // a shape that fits the L2 (a 4096 x 4096 projection is 34 MB, an H200's L2 60 MB) is not timed hot.
    const size_t w_bytes = static_cast<size_t>(s.n * s.k) * dtype_bytes(s.dtype);
    const size_t l2 = static_cast<size_t>(std::max(m.info.l2_bytes, 0));
    // (At most 64 copies: a weight small enough to need more is latency-bound, hot or cold.)
    const int copies = static_cast<int>(std::clamp<size_t>((4 * l2 + w_bytes - 1) / w_bytes, 1, 64));
    HELIUM_ASSIGN_OR_RETURN(auto wbuf, allocate(w_bytes * copies));
    HELIUM_ASSIGN_OR_RETURN(auto xbuf, allocate(static_cast<size_t>(s.k) * 4));
    HELIUM_ASSIGN_OR_RETURN(auto ybuf, allocate(static_cast<size_t>(s.n) * 4));
    Tensor all_w(wbuf->data(), s.dtype, {s.n * copies, s.k});
    Tensor x(xbuf->data(), DType::F32, {1, s.k}), y(ybuf->data(), DType::F32, {1, s.n});
    fill_random(all_w, 1, 0.0f, 0.05f);
    fill_random(x, 2, 0.0f, 1.0f);
    auto w_copy = [&](int i) {
      return Tensor(static_cast<char*>(wbuf->data()) + (i % copies) * w_bytes, s.dtype, {s.n, s.k});
    };
    // µs a call: `warm` calls, then the mean of at least `least_reps` (and of one per copy) on the next copies.
    auto time_us = [&](const Tensor& xt, const Tensor& yt, const cuda::MatmulDecodeConfig& config, int warm,
                       int least_reps) {
      for (int i = 0; i < warm; ++i) cuda::matmul_decode(m.ctx, xt, w_copy(i), Tensor(), yt, config);
      const int reps = std::max(least_reps, copies);
      HELIUM_CUDA_CHECK(cudaEventRecord(start, m.ctx.stream));
      for (int i = 0; i < reps; ++i) cuda::matmul_decode(m.ctx, xt, w_copy(i + warm), Tensor(), yt, config);
      HELIUM_CUDA_CHECK(cudaEventRecord(stop, m.ctx.stream));
      HELIUM_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      HELIUM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      return ms * 1000.0f / static_cast<float>(reps);
    };
    std::vector<std::pair<cuda::MatmulDecodeConfig, float>> timed;
    for (const auto& cand : cuda::matmul_decode_candidates(s.n, s.k, s.dtype)) {
      if (static_cast<int64_t>(cuda::matmul_decode_ring_bytes(cand, s.dtype)) > cuda::kTuneMaxRingBytes) continue;
      timed.emplace_back(cand, time_us(x, y, cand, 3, 20));
    }
    float best_us = 0;
    const cuda::MatmulDecodeConfig best =
        cuda::choose_decode_config(timed, s.dtype, cuda::matmul_decode_default_config(s.n, s.k, s.dtype), &best_us);
    // The tensor-core configuration's multi-row launches: 16, 32, 48 and 64 rows (as many as the backend's rows
    // and scratch allow) on the default kernel and on the x-shared one (W and G as a launch picks them).
    std::vector<cuda::XSharedTiming> xs_timed;
    int most_groups = 0;
    while (most_groups < 4 && int64_t{16} * (most_groups + 1) <= m.ctx.max_rows &&
           m.ctx.matmul_scratch_bytes >= static_cast<size_t>(16 * (most_groups + 1) * s.k) * 4)
      ++most_groups;
    if (best.mma_stages > 0 && most_groups > 0) {
      const RestoredOnExit<int> x_shared{m.ctx.mma_x_shared};
      const int64_t most_rows = int64_t{16} * most_groups;
      HELIUM_ASSIGN_OR_RETURN(auto xrows, allocate(static_cast<size_t>(most_rows * s.k) * 4));
      HELIUM_ASSIGN_OR_RETURN(auto yrows, allocate(static_cast<size_t>(most_rows * s.n) * 4));
      fill_random(Tensor(xrows->data(), DType::F32, {most_rows, s.k}), 3, 0.0f, 1.0f);
      for (int groups = 1; groups <= most_groups; ++groups) {
        const int64_t rows = int64_t{16} * groups;  // the first rows of the buffers
        Tensor xr(xrows->data(), DType::F32, {rows, s.k}), yr(yrows->data(), DType::F32, {rows, s.n});
        cuda::XSharedTiming t{groups};
        m.ctx.mma_x_shared = 0;  // the default kernel, then auto: every launch of row groups of 16
        t.default_us = time_us(xr, yr, best, 2, 10);
        m.ctx.mma_x_shared = -1;
        t.x_shared_us = time_us(xr, yr, best, 2, 10);
        xs_timed.push_back(t);
      }
    }
    const int xs_from = xs_timed.empty() ? 0 : cuda::choose_x_shared_from_groups(xs_timed);
    m.matmul_table.entries.push_back({s.n, s.k, s.dtype, best, xs_from});
    nlohmann::json entry = {{"n", s.n}, {"k", s.k}, {"dtype", std::string(dtype_name(s.dtype))},
                            {"config", config_to_json(best)}, {"us", best_us}};
    if (!xs_timed.empty()) {
      entry["x_shared_from_groups"] = xs_from;
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& t : xs_timed)
        rows.push_back({{"rows", 16 * t.groups}, {"default_us", t.default_us}, {"x_shared_us", t.x_shared_us}});
      entry["x_shared_timed"] = rows;
    }
    out["shapes"].push_back(entry);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  m.ctx.matmul_decode_table = &m.matmul_table;
  write_cache_file(path, out);
  return Status::ok();
}

// Decode attention's partition sizes, timed where a decode step runs them: the q/k/v projection, the q/k
// prologue, the attention (partitions and merge) and o_proj, one row at each key count from 1,024 up to the context (powers of two,
// and the context itself; at most 32,768 keys, beyond which partitions are the longest either way), with
// every size whose partition count the reserved scratch holds, in a replayed graph of programmatic launches
// over K/V copies larger than the L2 (a step's attention reads its layer's keys from HBM).
std::string CudaBackend::attention_tuning_cache_path(const AttentionShape& shape, int64_t hidden, DType kv_dtype,
                                                      int page_size, int64_t max_context) const {
  std::ostringstream key;
  key << "attention-" << kAttentionTuneRevision << ';' << shape.n_heads << ';' << shape.n_kv_heads << ';'
      << shape.head_dim << ';' << hidden << ';' << dtype_name(kv_dtype) << ';' << page_size << ';' << max_context
      << ';' << impl_->options.max_context;
  return cache_file_path(impl_->info, "attention_", key.str());
}

int CudaBackend::attention_oproj_stages() const { return impl_->ctx.oproj_stages; }

std::array<int, 3> CudaBackend::attention_partition_tiers() const {
  const cuda::PartitionTiers& t = impl_->ctx.attention_tiers;
  return {t.small_end, t.medium_end, t.large_end};
}

Status CudaBackend::tune_attention(const AttentionShape& shape, int64_t hidden, DType kv_dtype, int page_size,
                                   int64_t max_context, bool retune) {
  Impl& m = *impl_;
  // Tiers set by hand (HELIUM_CUDA_ATTN_PARTITIONS), a diagnostic that leaves kernels out, or a cache type the
  // decode kernels do not take: nothing to time.
  const char* forced = std::getenv("HELIUM_CUDA_ATTN_PARTITIONS");
  if ((forced != nullptr && *forced) || m.ctx.omit != 0 || (kv_dtype != DType::BF16 && kv_dtype != DType::F32) ||
      shape.n_heads <= 0 || shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0 || page_size <= 0 ||
      hidden <= 0)
    return Status::ok();
  max_context = std::min(max_context, m.options.max_context);
  // The partials' scratch was reserved for the tiers in force at creation: no choice may need more.
  const int64_t max_partitions = cuda::max_partition_count(m.options.max_context, m.reserved_tiers);
  const std::string path = attention_tuning_cache_path(shape, hidden, kv_dtype, page_size, max_context);
  // o_proj's depth set by hand (HELIUM_CUDA_OPROJ_STAGES) is neither timed nor replaced by the cache's.
  const char* forced_oproj = std::getenv("HELIUM_CUDA_OPROJ_STAGES");
  const bool time_oproj = forced_oproj == nullptr || *forced_oproj == '\0';
  if (!retune) {
    if (auto cached = read_cache_file(path); cached.has_value()) {
      // A file written while the depth was set by hand has none: timed again when it is not.
      auto tuning = cuda::read_attention_tuning(*cached, max_context, max_partitions);
      if (tuning.is_ok() && (!time_oproj || tuning.value().oproj_stages >= 0)) {
        m.ctx.attention_tiers = tuning.value().tiers;
        if (time_oproj) m.ctx.oproj_stages = tuning.value().oproj_stages;
        return Status::ok();
      }
    }
  }
  std::vector<int> key_counts;
  const int64_t top = std::min<int64_t>(max_context, 32768);
  for (int64_t keys = 1024; keys < top; keys *= 2) key_counts.push_back(static_cast<int>(keys));
  if (top >= 1024) key_counts.push_back(static_cast<int>(top));
  if (key_counts.empty()) return Status::ok();  // contexts under 1,024 keys: one or a few partitions either way

  // One row's K/V at the most keys timed, in copies that together exceed 4x the L2 (at least one); each
  // copy a sequence of consecutive pages. Fewer keys use the first pages of each copy.
  const int64_t kv_dim = int64_t{shape.n_kv_heads} * shape.head_dim;
  const int64_t pages = (top + page_size - 1) / page_size, copy_slots = pages * page_size;
  const size_t copy_bytes = static_cast<size_t>(copy_slots * kv_dim) * dtype_bytes(kv_dtype);
  const size_t l2 = static_cast<size_t>(std::max(m.info.l2_bytes, 0));
  const int copies = static_cast<int>(std::clamp<size_t>((4 * l2 + 2 * copy_bytes - 1) / (2 * copy_bytes), 1, 64));
  // The projections' weights, (q + 2 kv) x hidden and hidden x q (below), in copies that together exceed 4x
  // the L2.
  const int64_t q_dim = int64_t{shape.n_heads} * shape.head_dim, qkv_rows = q_dim + 2 * kv_dim;
  const size_t layer_w_bytes = static_cast<size_t>((qkv_rows + q_dim) * hidden) * 2;
  const int w_copies = static_cast<int>(std::clamp<size_t>((4 * l2 + layer_w_bytes - 1) / layer_w_bytes, 1, 16));
  auto kbuf = allocate(copy_bytes * copies);
  auto vbuf = allocate(copy_bytes * copies);
  auto wbuf = allocate(layer_w_bytes * w_copies);
  // No room to time in (a device nearly full at load): the tiers stay as they are, which the scratch holds.
  if (!kbuf.is_ok() || !vbuf.is_ok() || !wbuf.is_ok()) return Status::ok();
  const Tensor k_cache(kbuf.value()->data(), kv_dtype, {copy_slots * copies, kv_dim});
  const Tensor v_cache(vbuf.value()->data(), kv_dtype, {copy_slots * copies, kv_dim});
  fill_random(k_cache, 11, 0.0f, 1.0f);
  fill_random(v_cache, 12, 0.0f, 1.0f);
  // Between the matmuls a step runs it between, as in the decode graph (timed alone, without the projection's
  // tail to hide the partitions' early K/V loads behind, 128-key partitions won at 2K keys where 64-key ones
  // were faster in the step: docs/benchmarks.md, thirty-fourth session): the q/k/v projection, BF16 weights
  // of (q + 2 kv) x hidden, whose outputs the prologue reads, and o_proj, hidden x q, which reads the merge's
  // split. The model's own widths: hidden may differ from q (Qwen3-32B: 5,120 against 64 heads x 128).
  HELIUM_ASSIGN_OR_RETURN(auto qkv,
                          allocate(static_cast<size_t>(2 * q_dim + 2 * kv_dim + shape.head_dim + 3 * hidden) * 4));
  float* f = static_cast<float*>(qkv->data());
  const Tensor q(f, DType::F32, {1, q_dim}), out(f + q_dim, DType::F32, {1, q_dim});
  const Tensor k(f + 2 * q_dim, DType::F32, {1, kv_dim}), v(f + 2 * q_dim + kv_dim, DType::F32, {1, kv_dim});
  const Tensor inv_freq(f + 2 * q_dim + 2 * kv_dim, DType::F32, {shape.head_dim / 2});
  float* g = f + 2 * q_dim + 2 * kv_dim + shape.head_dim;
  const Tensor x(g, DType::F32, {1, hidden}), resid(g + hidden, DType::F32, {1, hidden});
  const Tensor scratch(g + 2 * hidden, DType::F32, {1, hidden});
  fill_random(Tensor(f, DType::F32, {2 * q_dim + 2 * kv_dim}), 13, 0.0f, 1.0f);
  fill_random(inv_freq, 14, 0.5f, 0.5f);
  fill_random(Tensor(g, DType::F32, {2 * hidden}), 15, 0.0f, 1.0f);
  auto* w0 = static_cast<uint16_t*>(wbuf.value()->data());
  fill_random(Tensor(w0, DType::BF16, {static_cast<int64_t>(layer_w_bytes / 2) * w_copies}), 16, 0.0f, 0.05f);
  auto w_qkv = [&](int i) { return Tensor(w0 + (i % w_copies) * layer_w_bytes / 2, DType::BF16, {qkv_rows, hidden}); };
  auto w_o = [&](int i) {
    return Tensor(w0 + (i % w_copies) * layer_w_bytes / 2 + qkv_rows * hidden, DType::BF16, {hidden, q_dim});
  };
  // Block tables (copy c: its pages in order), the row table's copy numbers, write slots, prefix, position.
  const int64_t at_rows = copies * pages, at_write = at_rows + copies, at_prefix = at_write + copies;
  std::vector<int32_t> host(static_cast<size_t>(at_prefix + 2));  // ... then the prefix and the position
  for (int c = 0; c < copies; ++c) {
    for (int64_t p = 0; p < pages; ++p) host[c * pages + p] = static_cast<int32_t>(c * pages + p);
    host[at_rows + c] = c;
  }
  HELIUM_ASSIGN_OR_RETURN(auto lbuf, allocate(host.size() * 4));
  auto* dev = static_cast<int32_t*>(lbuf->data());
  const Tensor positions(dev + at_prefix + 1, DType::I32, {1});
  const RopeParams rope{shape.head_dim, shape.head_dim, 1.0f};

  RestoredOnExit<cuda::PartitionTiers> restore{m.ctx.attention_tiers};  // or the choice, once made
  RestoredOnExit<int> restore_oproj{m.ctx.oproj_stages};
  cudaEvent_t start, stop;
  HELIUM_CUDA_CHECK(cudaEventCreate(&start));
  HELIUM_CUDA_CHECK(cudaEventCreate(&stop));
  // The chain's layout at `keys` keys (every copy's row that long, writing its last slot).
  auto set_keys = [&](int keys) {
    for (int c = 0; c < copies; ++c) host[at_write + c] = static_cast<int32_t>(c * copy_slots + keys - 1);
    host[at_prefix] = keys;
    host[at_prefix + 1] = keys - 1;
    copy_to_device(Tensor(dev, DType::I32, {static_cast<int64_t>(host.size())}), host.data());
  };
  // µs a layer of the chain at `keys` keys under the Context as it is (tiers, o_proj's depth): captured as a
  // graph of `calls` layers, replayed once to warm, then the median of five replays.
  auto time_chain = [&](int keys) -> Result<float> {
    const int calls = std::max({copies, w_copies, 12});
    begin_capture();
    for (int i = 0; i < calls; ++i) {
      const int c = i % copies;
      AttentionLayout layout;
      layout.page_size = page_size;
      layout.block_tables = Tensor(dev, DType::I32, {copies, pages});
      layout.row_table = Tensor(dev + at_rows + c, DType::I32, {1});
      layout.write_slots = Tensor(dev + at_write + c, DType::I32, {1});
      layout.prefix_lens = Tensor(dev + at_prefix, DType::I32, {1});
      layout.max_keys = keys;
      const Tensor qkv_out[] = {q, k, v};
      matmul_split(x, w_qkv(i), Tensor(), qkv_out);
      cuda::qk_norm_rope_kv_write(m.ctx, q, k, v, Tensor(), Tensor(), 1e-6f, shape.n_heads, shape.n_kv_heads,
                                  positions, inv_freq, rope, layout.write_slots, k_cache, v_cache);
      m.attention(q, k_cache, v_cache, shape, layout, out, {});
      matmul_add(out, w_o(i), Tensor(), scratch, resid);
    }
    auto graph = end_capture();
    if (!graph.is_ok()) return graph.status().with_context("attention tuning");
    graph.value()->replay();  // warm
    std::vector<float> per_call;
    for (int r = 0; r < 5; ++r) {
      HELIUM_CUDA_CHECK(cudaEventRecord(start, m.ctx.stream));
      graph.value()->replay();
      HELIUM_CUDA_CHECK(cudaEventRecord(stop, m.ctx.stream));
      HELIUM_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      HELIUM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      per_call.push_back(ms * 1000.0f / static_cast<float>(calls));
    }
    std::sort(per_call.begin(), per_call.end());
    return per_call[per_call.size() / 2];
  };
  std::vector<cuda::PartitionTiming> timed;
  nlohmann::json timings = nlohmann::json::array();
  Status status = Status::ok();
  for (int keys : key_counts) {
    set_keys(keys);
    for (int size = 64; size <= cuda::kMaxPartitionKeys; size *= 2) {
      if ((keys + size - 1) / size > max_partitions) continue;
      // Every row of `keys` keys cut into `size`-key partitions.
      cuda::PartitionTiers t;
      t.small_end = size == 64 ? 1 << 30 : 0;
      t.medium_end = size <= 128 ? 1 << 30 : 0;
      t.large_end = size <= 256 ? 1 << 30 : 0;
      m.ctx.attention_tiers = t;
      auto us = time_chain(keys);
      if (!us.is_ok()) {
        status = us.status();
        break;
      }
      timed.push_back({keys, size, us.value()});
      timings.push_back({{"keys", keys}, {"partition_keys", size}, {"us", us.value()}});
    }
    if (!status.is_ok()) break;
  }
  const cuda::PartitionTiers chosen =
      status.is_ok() ? cuda::choose_partition_tiers(timed, m.reserved_tiers) : cuda::PartitionTiers{};
  // o_proj's depth after attention (Context::oproj_stages) under the chosen tiers at the fewest keys, where
  // the chain's latency is the largest part of a step: the deep ring gained on an H100 and lost on an H200
  // (cuda_ops.cuh). Three rounds of the two depths alternating, each depth's median round.
  int oproj = restore_oproj.kept;
  nlohmann::json oproj_timings = nlohmann::json::array();
  if (status.is_ok() && time_oproj) {
    m.ctx.attention_tiers = chosen;
    set_keys(key_counts.front());
    const int depths[] = {restore_oproj.kept, restore_oproj.kept == 0 ? 10 : 0};
    std::vector<float> rounds[2];
    for (int round = 0; round < 3 && status.is_ok(); ++round)
      for (int d = 0; d < 2; ++d) {
        m.ctx.oproj_stages = depths[d];
        auto us = time_chain(key_counts.front());
        if (!us.is_ok()) {
          status = us.status();
          break;
        }
        rounds[d].push_back(us.value());
      }
    if (status.is_ok()) {
      std::vector<cuda::OprojTiming> oproj_timed;
      for (int d = 0; d < 2; ++d) {
        std::sort(rounds[d].begin(), rounds[d].end());
        oproj_timed.push_back({depths[d], rounds[d][rounds[d].size() / 2]});
        oproj_timings.push_back(
            {{"keys", key_counts.front()}, {"stages", depths[d]}, {"us", oproj_timed.back().us}});
      }
      oproj = cuda::choose_oproj_stages(oproj_timed, restore_oproj.kept);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  HELIUM_RETURN_IF_ERROR(status);
  restore.kept = chosen;
  restore_oproj.kept = oproj;
  nlohmann::json out_json = cache_file_header(m.info);
  out_json["tiers"] = {{"small_end", chosen.small_end}, {"medium_end", chosen.medium_end}, {"large_end", chosen.large_end}};
  out_json["timed"] = timings;
  if (time_oproj) {
    out_json["oproj_stages"] = oproj;
    out_json["oproj_timed"] = oproj_timings;
  }
  write_cache_file(path, out_json);
  return Status::ok();
}

}  // namespace helium
