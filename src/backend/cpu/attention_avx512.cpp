// backend/cpu/attention_avx512.cpp — the AVX-512 attention kernel (contract in attention.h).
// Scores: four keys at a time, one zmm accumulator each over head_dim (four independent FMA chains), summed
// by one fixed network (sum4). Softmax weights: 16 keys per vector with the polynomial exp. Values: the output chunk of a head (up to 128 floats, 8 zmm) stays in
// registers while the tile's keys are accumulated into it in key order.
#include "backend/cpu/attention.h"
#include "backend/cpu/simd_avx512.h"

namespace helium::cpu::avx512 {

namespace {

constexpr int kMaxVectorsPerChunk = 8;
constexpr int kChunkFloats = kMaxVectorsPerChunk * kLanes;

constexpr int kKeysPerGroup = 4;

// The four sums of a, b, c, d (16 lanes each) as one vector: halves added pairwise down to 4 lanes per
// input, then two rounds of horizontal adds. Every score goes through this one network, so a key's score
// does not depend on which keys share its group.
__m128 sum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  auto to4 = [](__m512 v) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    return _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  };
  return _mm_hadd_ps(_mm_hadd_ps(to4(a), to4(b)), _mm_hadd_ps(to4(c), to4(d)));
}

// scores[0..3] = (q · k_i) · scale for the keys at k[0..3], with four independent accumulators.
template <class Load>
void scores4(const float* q, const void* const* k, int head_dim, float scale, float* scores) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  int d = 0;
  for (; d + kLanes <= head_dim; d += kLanes) {
    const __m512 qv = _mm512_loadu_ps(q + d);
    a0 = _mm512_fmadd_ps(qv, Load::load(k[0], d), a0);
    a1 = _mm512_fmadd_ps(qv, Load::load(k[1], d), a1);
    a2 = _mm512_fmadd_ps(qv, Load::load(k[2], d), a2);
    a3 = _mm512_fmadd_ps(qv, Load::load(k[3], d), a3);
  }
  if (d < head_dim) {
    const __mmask16 m = tail_mask(head_dim - d);
    const __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
    a0 = _mm512_fmadd_ps(qv, Load::load_tail(k[0], d, m), a0);
    a1 = _mm512_fmadd_ps(qv, Load::load_tail(k[1], d, m), a1);
    a2 = _mm512_fmadd_ps(qv, Load::load_tail(k[2], d, m), a2);
    a3 = _mm512_fmadd_ps(qv, Load::load_tail(k[3], d, m), a3);
  }
  _mm_storeu_ps(scores, _mm_mul_ps(sum4(a0, a1, a2, a3), _mm_set1_ps(scale)));
}

// o[d0, d0 + NV·16) (the last vector masked by last_mask) = o · correction (or 0 on the first tile)
// + Σ_j probs[j] · v_j, then divided by l on the row's last tile (l > 0).
template <class Load, int NV>
void accumulate_values(float* o, const float* probs, const void* const* v_rows, int count, int d0,
                       __mmask16 last_mask, bool first, float correction, float l) {
  __m512 acc[NV];
  const __m512 corr = _mm512_set1_ps(correction);
  for (int v = 0; v < NV; ++v) {
    const __mmask16 m = v == NV - 1 ? last_mask : static_cast<__mmask16>(0xffff);
    acc[v] = first ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_maskz_loadu_ps(m, o + d0 + v * kLanes), corr);
  }
  for (int j = 0; j < count; ++j) {
    const __m512 pj = _mm512_set1_ps(probs[j]);
    for (int v = 0; v < NV - 1; ++v) acc[v] = _mm512_fmadd_ps(pj, Load::load(v_rows[j], d0 + v * kLanes), acc[v]);
    acc[NV - 1] = _mm512_fmadd_ps(pj, Load::load_tail(v_rows[j], d0 + (NV - 1) * kLanes, last_mask), acc[NV - 1]);
  }
  if (l > 0.0f)
    for (int v = 0; v < NV; ++v) acc[v] = _mm512_div_ps(acc[v], _mm512_set1_ps(l));
  for (int v = 0; v < NV; ++v) {
    const __mmask16 m = v == NV - 1 ? last_mask : static_cast<__mmask16>(0xffff);
    _mm512_mask_storeu_ps(o + d0 + v * kLanes, m, acc[v]);
  }
}

template <class Load>
void accumulate_head(float* o, const float* probs, const void* const* v_rows, int count, int head_dim, bool first,
                     float correction, float l) {
  for (int d0 = 0; d0 < head_dim; d0 += kChunkFloats) {
    const int floats = head_dim - d0 < kChunkFloats ? head_dim - d0 : kChunkFloats;
    const int vectors = (floats + kLanes - 1) / kLanes;
    const __mmask16 last_mask = tail_mask(floats - (vectors - 1) * kLanes);
    switch (vectors) {
      case 1: accumulate_values<Load, 1>(o, probs, v_rows, count, d0, last_mask, first, correction, l); break;
      case 2: accumulate_values<Load, 2>(o, probs, v_rows, count, d0, last_mask, first, correction, l); break;
      case 3: accumulate_values<Load, 3>(o, probs, v_rows, count, d0, last_mask, first, correction, l); break;
      case 4: accumulate_values<Load, 4>(o, probs, v_rows, count, d0, last_mask, first, correction, l); break;
      case 5: accumulate_values<Load, 5>(o, probs, v_rows, count, d0, last_mask, first, correction, l); break;
      case 6: accumulate_values<Load, 6>(o, probs, v_rows, count, d0, last_mask, first, correction, l); break;
      case 7: accumulate_values<Load, 7>(o, probs, v_rows, count, d0, last_mask, first, correction, l); break;
      default: accumulate_values<Load, 8>(o, probs, v_rows, count, d0, last_mask, first, correction, l); break;
    }
  }
}

// One head's update for one tile: scores, the online-softmax step, the value accumulation (attention.h).
template <class Load>
void attend_tile(const float* q, float* o, const void* const* k_rows, const void* const* v_rows, int count,
                 int head_dim, float scale, bool first, bool last, float& m, float& l, float* s) {
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  // Groups of 4 keys; the last group repeats the tile's last key (its extra scores are overwritten).
  for (int j = 0; j < count; j += kKeysPerGroup) {
    const void* group[kKeysPerGroup];
    for (int i = 0; i < kKeysPerGroup; ++i) group[i] = k_rows[j + i < count ? j + i : count - 1];
    scores4<Load>(q, group, head_dim, scale, s + j);
  }
  // Lanes past `count` read as -inf: they take no part in the max and their exp is 0.
  __m512 vmax = minus_inf;
  for (int j = 0; j < count; j += kLanes)
    vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(minus_inf, tail_mask(count - j < kLanes ? count - j : kLanes), s + j));
  const float tile_max = hmax(vmax);
  const float m_new = first ? tile_max : (m > tile_max ? m : tile_max);
  const float correction = first ? 0.0f : _mm_cvtss_f32(_mm512_castps512_ps128(exp(_mm512_set1_ps(m - m_new))));
  __m512 vsum = _mm512_setzero_ps();
  const __m512 vm = _mm512_set1_ps(m_new);
  for (int j = 0; j < count; j += kLanes) {
    const __mmask16 mask = tail_mask(count - j < kLanes ? count - j : kLanes);
    const __m512 e = exp(_mm512_sub_ps(_mm512_mask_loadu_ps(minus_inf, mask, s + j), vm));
    vsum = _mm512_add_ps(vsum, e);
    _mm512_mask_storeu_ps(s + j, mask, e);
  }
  l = first ? hsum(vsum) : l * correction + hsum(vsum);
  m = m_new;
  accumulate_head<Load>(o, s, v_rows, count, head_dim, first, correction, last ? l : 0.0f);
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

  float m[kAttentionMaxHeadsPerPass], l[kAttentionMaxHeadsPerPass];
  alignas(64) float probs[kAttentionMaxHeadsPerPass][kAttentionTileKeys];
  const void* k_rows[kAttentionTileKeys];
  const void* v_rows[kAttentionTileKeys];
  for (int64_t t0 = 0; t0 < n_keys; t0 += kAttentionTileKeys) {
    const bool first = t0 == 0, last = t0 + kAttentionTileKeys >= n_keys;
    const int count = n_keys - t0 < kAttentionTileKeys ? static_cast<int>(n_keys - t0) : kAttentionTileKeys;
    for (int j = 0; j < count; ++j) {
      const int64_t offset = list[t0 + j] * kv_row_bytes + kv_head_bytes;
      k_rows[j] = static_cast<const uint8_t*>(p.k_cache) + offset;
      v_rows[j] = static_cast<const uint8_t*>(p.v_cache) + offset;
    }
    for (int h = 0; h < heads; ++h) {
      const float* q = p.q + row * q_stride + static_cast<int64_t>(head_begin + h) * head_dim;
      float* o = p.out + row * q_stride + static_cast<int64_t>(head_begin + h) * head_dim;
      attend_tile<Load>(q, o, k_rows, v_rows, count, head_dim, p.scale, first, last, m[h], l[h], probs[h]);
    }
  }
}

}  // namespace

void attention(const AttentionProblem& p, int64_t row, int head_begin, int head_end) {
  if (p.kv_dtype == DType::BF16) return attention_typed<LoadBF16>(p, row, head_begin, head_end);
  attention_typed<LoadF32>(p, row, head_begin, head_end);
}

}  // namespace helium::cpu::avx512
