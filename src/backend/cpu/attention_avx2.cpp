// backend/cpu/attention_avx2.cpp — the AVX2 attention kernel (contract in attention.h); same structure as
// attention_avx512.cpp with 8 lanes: scores four keys at a time, and a head's output chunk of up to 64
// floats (8 ymm) stays in registers while the tile's keys are accumulated into it in key order.
#include <immintrin.h>

#include "backend/cpu/attention.h"
#include "backend/cpu/simd_avx2.h"

namespace helium::cpu::avx2 {

namespace {

constexpr int kMaxVectorsPerChunk = 8;
constexpr int kChunkFloats = kMaxVectorsPerChunk * kLanes;

// Lanes [0, n) all ones, for maskload/maskstore of the last partial vector.
__m256i lane_mask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

constexpr int kKeysPerGroup = 4;

// The four sums of a, b, c, d (8 lanes each) as one vector: halves added, then two rounds of horizontal
// adds. Every score goes through this one network, so a key's score does not depend on its group.
__m128 sum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  auto to4 = [](__m256 v) { return _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); };
  return _mm_hadd_ps(_mm_hadd_ps(to4(a), to4(b)), _mm_hadd_ps(to4(c), to4(d)));
}

// scores[0..3] = (q · k_i) · scale for the keys at k[0..3], with four independent accumulators.
template <class Load>
void scores4(const float* q, const void* const* k, int head_dim, float scale, float* scores) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int d = 0;
  for (; d + kLanes <= head_dim; d += kLanes) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    a0 = _mm256_fmadd_ps(qv, Load::load(k[0], d), a0);
    a1 = _mm256_fmadd_ps(qv, Load::load(k[1], d), a1);
    a2 = _mm256_fmadd_ps(qv, Load::load(k[2], d), a2);
    a3 = _mm256_fmadd_ps(qv, Load::load(k[3], d), a3);
  }
  if (d < head_dim) {
    const int tail = head_dim - d;
    const __m256 qv = LoadF32::load_tail(q, d, tail);
    a0 = _mm256_fmadd_ps(qv, Load::load_tail(k[0], d, tail), a0);
    a1 = _mm256_fmadd_ps(qv, Load::load_tail(k[1], d, tail), a1);
    a2 = _mm256_fmadd_ps(qv, Load::load_tail(k[2], d, tail), a2);
    a3 = _mm256_fmadd_ps(qv, Load::load_tail(k[3], d, tail), a3);
  }
  _mm_storeu_ps(scores, _mm_mul_ps(sum4(a0, a1, a2, a3), _mm_set1_ps(scale)));
}

// o[d0, d0 + NV·8) (the last vector holding last_floats) = o · correction (or 0 on the first tile)
// + Σ_j probs[j] · v_j, then divided by l on the row's last tile (l > 0).
template <class Load, int NV>
void accumulate_values(float* o, const float* probs, const void* const* v_rows, int count, int d0, int last_floats,
                       bool first, float correction, float l) {
  __m256 acc[NV];
  const __m256 corr = _mm256_set1_ps(correction);
  const __m256i last_mask = lane_mask(last_floats);
  for (int v = 0; v < NV - 1; ++v)
    acc[v] = first ? _mm256_setzero_ps() : _mm256_mul_ps(_mm256_loadu_ps(o + d0 + v * kLanes), corr);
  acc[NV - 1] = first ? _mm256_setzero_ps()
                      : _mm256_mul_ps(_mm256_maskload_ps(o + d0 + (NV - 1) * kLanes, last_mask), corr);
  for (int j = 0; j < count; ++j) {
    const __m256 pj = _mm256_set1_ps(probs[j]);
    for (int v = 0; v < NV - 1; ++v) acc[v] = _mm256_fmadd_ps(pj, Load::load(v_rows[j], d0 + v * kLanes), acc[v]);
    const __m256 last_v = last_floats == kLanes ? Load::load(v_rows[j], d0 + (NV - 1) * kLanes)
                                                : Load::load_tail(v_rows[j], d0 + (NV - 1) * kLanes, last_floats);
    acc[NV - 1] = _mm256_fmadd_ps(pj, last_v, acc[NV - 1]);
  }
  if (l > 0.0f)
    for (int v = 0; v < NV; ++v) acc[v] = _mm256_div_ps(acc[v], _mm256_set1_ps(l));
  for (int v = 0; v < NV - 1; ++v) _mm256_storeu_ps(o + d0 + v * kLanes, acc[v]);
  _mm256_maskstore_ps(o + d0 + (NV - 1) * kLanes, last_mask, acc[NV - 1]);
}

template <class Load>
void accumulate_head(float* o, const float* probs, const void* const* v_rows, int count, int head_dim, bool first,
                     float correction, float l) {
  for (int d0 = 0; d0 < head_dim; d0 += kChunkFloats) {
    const int floats = head_dim - d0 < kChunkFloats ? head_dim - d0 : kChunkFloats;
    const int vectors = (floats + kLanes - 1) / kLanes;
    const int last_floats = floats - (vectors - 1) * kLanes;
    switch (vectors) {
      case 1: accumulate_values<Load, 1>(o, probs, v_rows, count, d0, last_floats, first, correction, l); break;
      case 2: accumulate_values<Load, 2>(o, probs, v_rows, count, d0, last_floats, first, correction, l); break;
      case 3: accumulate_values<Load, 3>(o, probs, v_rows, count, d0, last_floats, first, correction, l); break;
      case 4: accumulate_values<Load, 4>(o, probs, v_rows, count, d0, last_floats, first, correction, l); break;
      case 5: accumulate_values<Load, 5>(o, probs, v_rows, count, d0, last_floats, first, correction, l); break;
      case 6: accumulate_values<Load, 6>(o, probs, v_rows, count, d0, last_floats, first, correction, l); break;
      case 7: accumulate_values<Load, 7>(o, probs, v_rows, count, d0, last_floats, first, correction, l); break;
      default: accumulate_values<Load, 8>(o, probs, v_rows, count, d0, last_floats, first, correction, l); break;
    }
  }
}

template <class Load>
void attention_typed(const AttentionProblem& p, int64_t row, int head_begin, int head_end) {
  const int head_dim = p.head_dim, heads = head_end - head_begin;
  const int kv_head = head_begin / (p.n_heads / p.n_kv_heads);
  const int64_t q_stride = static_cast<int64_t>(p.n_heads) * head_dim;
  const int64_t element_bytes = p.kv_dtype == DType::BF16 ? 2 : 4;
  const int64_t kv_row_bytes = static_cast<int64_t>(p.n_kv_heads) * head_dim * element_bytes;
  const int64_t kv_head_bytes = static_cast<int64_t>(kv_head) * head_dim * element_bytes;
  const int32_t* list = p.slots + p.row_offsets[row];
  const int64_t n_keys = p.row_offsets[row + 1] - p.row_offsets[row];
  const float minus_inf = -__builtin_inff();

  float m[kAttentionMaxHeadsPerPass], l[kAttentionMaxHeadsPerPass];
  alignas(32) float probs[kAttentionMaxHeadsPerPass][kAttentionTileKeys];
  const void* k_rows[kAttentionTileKeys];
  const void* v_rows[kAttentionTileKeys];
  for (int64_t t0 = 0; t0 < n_keys; t0 += kAttentionTileKeys) {
    const bool first = t0 == 0, last = t0 + kAttentionTileKeys >= n_keys;
    const int count = n_keys - t0 < kAttentionTileKeys ? static_cast<int>(n_keys - t0) : kAttentionTileKeys;
    const int padded = (count + kLanes - 1) / kLanes * kLanes;  // <= kAttentionTileKeys, a multiple of 8
    for (int j = 0; j < count; ++j) {
      const int64_t offset = list[t0 + j] * kv_row_bytes + kv_head_bytes;
      k_rows[j] = static_cast<const uint8_t*>(p.k_cache) + offset;
      v_rows[j] = static_cast<const uint8_t*>(p.v_cache) + offset;
    }
    for (int h = 0; h < heads; ++h) {
      const float* q = p.q + row * q_stride + static_cast<int64_t>(head_begin + h) * head_dim;
      float* o = p.out + row * q_stride + static_cast<int64_t>(head_begin + h) * head_dim;
      float* s = probs[h];
      // Groups of 4 keys; the last group repeats the tile's last key (its extra scores are overwritten).
      for (int j = 0; j < count; j += kKeysPerGroup) {
        const void* group[kKeysPerGroup];
        for (int i = 0; i < kKeysPerGroup; ++i) group[i] = k_rows[j + i < count ? j + i : count - 1];
        scores4<Load>(q, group, head_dim, p.scale, s + j);
      }
      // Padding lanes hold -inf: they take no part in the max and their exp is 0.
      for (int j = count; j < padded; ++j) s[j] = minus_inf;
      __m256 vmax = _mm256_set1_ps(minus_inf);
      for (int j = 0; j < padded; j += kLanes) vmax = _mm256_max_ps(vmax, _mm256_load_ps(s + j));
      const float tile_max = hmax(vmax);
      const float m_new = first ? tile_max : (m[h] > tile_max ? m[h] : tile_max);
      const float correction = first ? 0.0f : _mm256_cvtss_f32(exp(_mm256_set1_ps(m[h] - m_new)));
      __m256 vsum = _mm256_setzero_ps();
      const __m256 vm = _mm256_set1_ps(m_new);
      for (int j = 0; j < padded; j += kLanes) {
        const __m256 e = exp(_mm256_sub_ps(_mm256_load_ps(s + j), vm));
        vsum = _mm256_add_ps(vsum, e);
        _mm256_store_ps(s + j, e);
      }
      l[h] = first ? hsum(vsum) : l[h] * correction + hsum(vsum);
      m[h] = m_new;
      accumulate_head<Load>(o, s, v_rows, count, head_dim, first, correction, last ? l[h] : 0.0f);
    }
  }
}

}  // namespace

void attention(const AttentionProblem& p, int64_t row, int head_begin, int head_end) {
  if (p.kv_dtype == DType::BF16) return attention_typed<LoadBF16>(p, row, head_begin, head_end);
  attention_typed<LoadF32>(p, row, head_begin, head_end);
}

}  // namespace helium::cpu::avx2
