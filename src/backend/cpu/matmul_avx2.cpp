// backend/cpu/matmul_avx2.cpp — the AVX2 matmul kernel (contract in matmul.h).
// A tile computes RX rows × NW features with one ymm accumulator per output element; each w vector is
// converted once and used by RX rows, each x vector by NW features. The tile shape changes which loads
// are shared, never the order in which an output element is reduced.
#include <immintrin.h>

#include "backend/cpu/matmul.h"
#include "backend/cpu/simd_avx2.h"

namespace helium::cpu::avx2 {

namespace {

// Tile shapes: one row streams w with 8 features in flight (8 independent FMA chains hide the FMA
// latency); several rows use 2 × 4 tiles (8 accumulators + 2 x + 4 w vectors stay within the 16 ymm
// registers; each w load feeds 2 FMAs). Measured like the AVX-512 tiles (matmul_avx512.cpp): 2×4, 3×4,
// 4×3, 3×3 and 2×6 all gave 77-83 GFLOP/s for 64 BF16 rows on one Zen core, within noise.
constexpr int kDecodeMaxRows = 1;
constexpr int kDecodeFeatures = 8;
constexpr int kTileRows = 2;
constexpr int kTileFeatures = 4;

struct Tile {
  const float* x;     // first row of the tile
  int64_t x_stride;   // elements between rows of x
  const uint8_t* w;   // first feature of the tile
  int64_t w_stride;   // bytes between rows of w
  float* y;           // y[first row][first feature]
  int64_t y_stride;   // elements between rows of y
  int64_t k;
};

template <class Load, int RX, int NW>
void tile_kernel(const Tile& t) {
  __m256 acc[RX][NW];
  for (int r = 0; r < RX; ++r)
    for (int j = 0; j < NW; ++j) acc[r][j] = _mm256_setzero_ps();
  const int64_t k_full = t.k / kLanes * kLanes;
  for (int64_t i = 0; i < k_full; i += kLanes) {
    __m256 wv[NW];
    for (int j = 0; j < NW; ++j) wv[j] = Load::load(t.w + j * t.w_stride, i);
    for (int r = 0; r < RX; ++r) {
      const __m256 xv = _mm256_loadu_ps(t.x + r * t.x_stride + i);
      for (int j = 0; j < NW; ++j) acc[r][j] = _mm256_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
  if (k_full < t.k) {
    const int tail = static_cast<int>(t.k - k_full);
    __m256 wv[NW];
    for (int j = 0; j < NW; ++j) wv[j] = Load::load_tail(t.w + j * t.w_stride, k_full, tail);
    for (int r = 0; r < RX; ++r) {
      const __m256 xv = LoadF32::load_tail(t.x + r * t.x_stride, k_full, tail);
      for (int j = 0; j < NW; ++j) acc[r][j] = _mm256_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < RX; ++r)
    for (int j = 0; j < NW; ++j) t.y[r * t.y_stride + j] = hsum(acc[r][j]);
}

template <class Load, int RX>
void tile_rows(const Tile& t, int nw) {
  switch (nw) {
    case 1: return tile_kernel<Load, RX, 1>(t);
    case 2: return tile_kernel<Load, RX, 2>(t);
    case 3: return tile_kernel<Load, RX, 3>(t);
    case 4: return tile_kernel<Load, RX, 4>(t);
    case 5: return tile_kernel<Load, RX, 5>(t);
    case 6: return tile_kernel<Load, RX, 6>(t);
    case 7: return tile_kernel<Load, RX, 7>(t);
    default: return tile_kernel<Load, RX, 8>(t);
  }
}

template <class Load>
void tile_any(const Tile& t, int rx, int nw) {
  if (rx == 1) return tile_rows<Load, 1>(t, nw);
  return tile_rows<Load, 2>(t, nw);
}

template <class Load>
void matmul_typed(const MatmulProblem& p, int64_t row_begin, int64_t row_end, int64_t n_begin, int64_t n_end) {
  const int64_t w_stride = p.k * (p.w_dtype == DType::F32 ? 4 : 2);
  const int64_t rows = row_end - row_begin;
  // Few rows: stream w with more features per pass; many rows: square tiles that reuse w from L1.
  const int64_t features = rows <= kDecodeMaxRows ? kDecodeFeatures : kTileFeatures;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += features) {
    const int nw = static_cast<int>(n_end - n0 < features ? n_end - n0 : features);
    for (int64_t r = row_begin; r < row_end; r += kTileRows) {
      const int rx = static_cast<int>(row_end - r < kTileRows ? row_end - r : kTileRows);
      const Tile t{p.x + r * p.k, p.k, static_cast<const uint8_t*>(p.w) + n0 * w_stride, w_stride,
                   p.y + r * p.n + n0, p.n, p.k};
      tile_any<Load>(t, rx, nw);
    }
  }
}

}  // namespace

void matmul(const MatmulProblem& p, int64_t row_begin, int64_t row_end, int64_t n_begin, int64_t n_end) {
  switch (p.w_dtype) {
    case DType::F16: return matmul_typed<LoadF16>(p, row_begin, row_end, n_begin, n_end);
    case DType::BF16: return matmul_typed<LoadBF16>(p, row_begin, row_end, n_begin, n_end);
    default: return matmul_typed<LoadF32>(p, row_begin, row_end, n_begin, n_end);
  }
}

}  // namespace helium::cpu::avx2
